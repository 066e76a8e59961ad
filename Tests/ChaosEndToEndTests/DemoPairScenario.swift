/// The built-in demo pair as a scenario file's text, for tests that run it through chaos: one proxy on two fresh ports
/// (from the lane's range), the server and its clients with extra flags, the lines protocol, the faults and `expect`.
enum DemoPairScenario {
    /// Two distinct free ports: the proxy's and the server's.
    static func ports() -> (listen: Int, upstream: Int) {
        let listen = ChaosCLI.freePort()
        var upstream = ChaosCLI.freePort()
        while upstream == listen { upstream = ChaosCLI.freePort() }
        return (listen, upstream)
    }

    /// The scenario `name`: `clients` demo clients with `clientFlags` against a server with `serverFlags`, through one
    /// proxy, with `faults` (scenario lines without their dash) and `expect` (`lost: 0`).
    static func text(
        name: String,
        duration: String,
        seed: Int = 5,
        serverFlags: String = "--rate 20",
        clientFlags: String = "--rate 20",
        clients: Int = 1,
        faults: [String],
        expect: String = "lost: 0"
    ) -> String {
        let (listen, upstream) = ports()
        return """
            name: \(name)
            duration: \(duration)
            seed: \(seed)
            proxies:
              - {name: stream, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
            pair:
              server:
                run: chaos demo server --listen 127.0.0.1:{upstream.port} \(serverFlags) --log {run_dir}/server.jsonl
                ready: tcp 127.0.0.1:{upstream.port}
                stop_grace: 2s
              client:
                run: chaos demo client --connect 127.0.0.1:{listen.port} --stream c{index} \(clientFlags) --log {run_dir}/client-{index}.jsonl
                count: \(clients)
                ready: connected
                stop_grace: 2s
            protocol: {framing: lines, format: json, seq: seq, stream: stream, ack: ack, ignore: {type: [PING, PONG, HELLO, WELCOME, ACK, GAP]}}
            faults:
            \(faults.map { "  - \($0)" }.joined(separator: "\n"))
            expect:
              \(expect)
            """
    }
}
