import ChaosCore
import Foundation
import Testing

@testable import ChaosControl
@testable import ChaosProxy

@Suite("HTTP control API", .serialized, .timeLimit(.minutes(5)))
struct ControlAPITests {
    func request(_ port: Int, _ method: String, _ path: String, body: String = "") throws -> (Int, String) {
        try apiRequest(port, method, path, body: body)
    }

    @Test("a fault posted as JSON is applied at once and lifted by DELETE; bad requests get 400 with the reason")
    func postAndDeleteFaults() async throws {
        let harness = try await ProxyHarness()
        let api = ControlAPI(proxies: [harness.proxy], group: harness.group)
        let address = try await api.start(host: "127.0.0.1", port: 0)
        let apiPort = try #require(Int(address.split(separator: ":").last ?? ""))
        try await offPool {
            let (client, server) = try harness.connectPair()
            let (created, body) = try request(
                apiPort,
                "POST",
                "/faults",
                body: #"{"latency": {"add": "150ms", "direction": "upstream"}}"#
            )
            #expect(created == 201, "\(body)")
            #expect(body.contains(#""id":1"#))
            let start = DispatchTime.now().uptimeNanoseconds
            try client.sendAll([1])
            #expect(server.receive(exactly: 1) == [1])
            #expect(DispatchTime.now().uptimeNanoseconds - start >= 150_000_000)
            #expect(try request(apiPort, "GET", "/faults").1.contains("latency"))
            #expect(try request(apiPort, "GET", "/proxies").1.contains(#""test":{"enabled":true"#))
            #expect(try request(apiPort, "GET", "/metrics").1.contains(#"chaos_connections_live{proxy="test"} 1"#))
            #expect(try request(apiPort, "DELETE", "/faults/1").0 == 200)
            #expect(try request(apiPort, "GET", "/faults").1.contains(#""faults":[]"#))
            let (bad, reason) = try request(apiPort, "POST", "/faults", body: #"{"latency": {"add": "soon"}}"#)
            #expect(bad == 400)
            #expect(reason.contains("request body:1:"), "\(reason)")
            #expect(reason.contains("not a duration"))
            #expect(try request(apiPort, "DELETE", "/faults/7").0 == 404)
            // A fault that is over (an instant disconnect) is no longer listed as active.
            #expect(try request(apiPort, "POST", "/faults", body: #"{"disconnect": {"mode": "reset"}}"#).0 == 201)
            var listed = ""
            for _ in 0..<100 {
                listed = try request(apiPort, "GET", "/faults").1
                if listed.contains(#""faults":[]"#) { break }
                usleep(20_000)
            }
            #expect(listed.contains(#""faults":[]"#), "\(listed)")
            #expect(try request(apiPort, "GET", "/nothing").0 == 404)
            client.close()
            server.close()
        }
        await api.stop()
        await harness.shutdown()
    }

    @Test(
        "POST /faults answers once a fault that starts now holds the live connections, however long that takes (the relay threads busy for 1.5 s: the answer waits)"
    )
    func answersOnceApplied() async throws {
        let harness = try await ProxyHarness()
        let api = ControlAPI(proxies: [harness.proxy], group: harness.group)
        let address = try await api.start(host: "127.0.0.1", port: 0)
        let apiPort = try #require(Int(address.split(separator: ":").last ?? ""))
        let relay = try #require(harness.epollRelay)
        try await offPool {
            let (client, server) = try harness.connectPair()
            #expect(harness.proxy.epollRelayConnections.count == 1, "unshaped, the connection starts on the epoll relay")
            // Shaping moves the connection to NIO, which waits for its relay thread: each is held for 1.5 s.
            for loop in relay.loops { loop.execute { usleep(1_500_000) } }
            let posted = DispatchTime.now().uptimeNanoseconds
            let (created, body) = try request(apiPort, "POST", "/faults", body: #"{"latency": {"add": "150ms", "direction": "upstream"}}"#)
            let answeredAfter = Double(DispatchTime.now().uptimeNanoseconds - posted) / 1e9
            #expect(created == 201, "\(body)")
            #expect(
                harness.proxy.epollRelayConnections.isEmpty && harness.proxy.liveConnections.count == 1,
                "answered after \(answeredAfter) s with the connection not yet on the shaping path"
            )
            let start = DispatchTime.now().uptimeNanoseconds
            try client.sendAll([1])
            #expect(server.receive(exactly: 1) == [1])
            #expect(DispatchTime.now().uptimeNanoseconds - start >= 150_000_000, "the first byte after the answer met the latency")
            client.close()
            server.close()
        }
        await api.stop()
        await harness.shutdown()
    }

    @Test("an instant fault with neither 'at' nor 'every' happens now, as a toxic does; an 'at' past ten years is 400")
    func instantFaultAndBounds() async throws {
        try await withControlAPI { harness, apiPort in
            let (client, server) = try harness.connectPair()
            let (created, body) = try apiRequest(apiPort, "POST", "/faults", body: #"{"disconnect": {"mode": "close"}}"#)
            #expect(created == 201, "\(body)")
            // The cut came: the client reads its end (a FIN), not a timeout.
            let (_, ended) = client.receiveUntilEnd()
            #expect(ended == .eof, "the disconnect cut the live connection: \(ended)")
            // At the bound (10 × 366 days) or past it, or lasting past it: 400 with the reason, not 201 with an empty timeline.
            for body in [
                #"{"disconnect": {"at": "3660d"}}"#, #"{"disconnect": {"at": "87840h"}}"#, #"{"disconnect": {"at": "3661d"}}"#,
                #"{"disconnect": {"at": "1s..3661d"}}"#, #"{"latency": {"at": "3660d", "for": "10d", "add": "1ms"}}"#,
                #"{"latency": {"at": "3659d", "for": "2d", "add": "1ms"}}"#, #"{"disconnect": {"after": "3660d", "every": "1s"}}"#,
            ] {
                let (status, reason) = try apiRequest(apiPort, "POST", "/faults", body: body)
                #expect(status == 400, "\(body): \(status) \(reason)")
                #expect(reason.contains("fault.at") || reason.contains("fault.after"), "\(body): \(reason)")
                #expect(reason.contains("10 years"), "\(body): \(reason)")
            }
            #expect(try apiRequest(apiPort, "POST", "/faults", body: #"{"latency": {"at": "3659d", "for": "1d", "add": "1ms"}}"#).0 == 201)
            #expect(try apiRequest(apiPort, "DELETE", "/faults").0 == 200)
            #expect(try apiRequest(apiPort, "GET", "/faults").1.contains(#""faults":[]"#))
            client.close()
            server.close()
        }
    }

    @Test("a fault posted to begin or go on past the run's end is 400, as a scenario file refuses one past its run")
    func faultPastTheRunIs400() async throws {
        // `chaos proxy` runs for a year unless told otherwise: 87601h (past ten 365-day years) would never happen.
        try await withControlAPI(runLength: .seconds(Int64(8760 * 3600))) { _, apiPort in
            for body in [
                #"{"latency": {"at": "87601h", "add": "1ms"}}"#, #"{"disconnect": {"at": "8760h"}}"#,
                #"{"latency": {"at": "8759h", "for": "2h", "add": "1ms"}}"#, #"{"disconnect": {"after": "8761h", "every": "1s"}}"#,
            ] {
                let (status, reason) = try apiRequest(apiPort, "POST", "/faults", body: body)
                #expect(status == 400, "\(body): \(status) \(reason)")
                #expect(reason.contains("within the run, which ends 8760h after the proxy's start"), "\(body): \(reason)")
            }
            let (status, reason) = try apiRequest(apiPort, "POST", "/faults", body: #"{"latency": {"at": "8759h", "for": "1h", "add": "1ms"}}"#)
            #expect(status == 201, "\(reason)")
            #expect(try apiRequest(apiPort, "DELETE", "/faults").0 == 200)
        }
    }

    @Test("'at' and 'every' count from the proxy's start, as a scenario's do: what is over is 400 or skipped, what began lasts its rest")
    func timesCountFromTheProxysStart() async throws {
        try await withControlAPI { harness, apiPort in
            // Let the proxy be up a while, so the request is well past its start.
            usleep(1_600_000)
            let (over, reason) = try apiRequest(apiPort, "POST", "/faults", body: #"{"disconnect": {"at": "1s"}}"#)
            #expect(over == 400, "\(reason)")
            #expect(reason.contains("'at' counts from the proxy's start"), "\(reason)")
            // Began at the proxy's start and lasts an hour: on now, its timeline line says when it began.
            let (began, lines) = try apiRequest(apiPort, "POST", "/faults", body: #"{"latency": {"at": "0s", "for": "1h", "add": "1ms"}}"#)
            #expect(began == 201, "\(lines)")
            #expect(lines.contains(#""timeline":["00:00:00.000  latency"#), "\(lines)")
            #expect(try apiRequest(apiPort, "GET", "/faults").1.contains("latency"))
            // Every second from the proxy's start: the occurrences already over are skipped, the first listed is to come.
            let (every, drawn) = try apiRequest(apiPort, "POST", "/faults", body: #"{"disconnect": {"every": "1s", "mode": "reset"}}"#)
            #expect(every == 201, "\(drawn)")
            #expect(!drawn.contains(#""00:00:00.000"#) && !drawn.contains(#""00:00:01.000"#), "\(drawn)")
            // A fault for a while with no 'at' begins now, whenever the request comes.
            let (now, window) = try apiRequest(apiPort, "POST", "/faults", body: #"{"stall": {"for": "300ms"}}"#)
            #expect(now == 201 && !window.contains(#""00:00:00.000"#), "\(window)")
            #expect(try apiRequest(apiPort, "DELETE", "/faults").0 == 200)
        }
    }
}

extension ControlAPITests {
    @Test(
        "POST /proxies with udp:// makes a UDP proxy that relays datagrams both ways and lists as udp://, an update keeps its transport; two schemes, TLS on UDP or an unknown scheme are 400"
    )
    func udpProxyThroughTheAPI() async throws {
        let harness = try await ProxyHarness()
        let api = ControlAPI(proxies: [], group: harness.group)
        let address = try await api.start(host: "127.0.0.1", port: 0)
        let apiPort = try #require(Int(address.split(separator: ":").last ?? ""))
        let server = try UDPTestSocket()
        try await offPool {
            let (created, body) = try apiRequest(
                apiPort,
                "POST",
                "/proxies",
                body: #"{"name": "media", "upstream": "udp://127.0.0.1:\#(server.port)"}"#
            )
            #expect(created == 201, "\(body)")
            let proxy = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
            let listen = proxy?["listen"] as? String ?? ""
            #expect(listen.hasPrefix("udp://127.0.0.1:") && proxy?["upstream"] as? String == "udp://127.0.0.1:\(server.port)", "\(body)")
            let port = try #require(Int(listen.split(separator: ":").last ?? ""))
            let client = try UDPTestSocket()
            client.send("up", to: port)
            let up = server.receiveText()
            #expect(up?.text == "up")
            if let up { server.send("down", to: up.fromPort) }
            #expect(client.receiveText()?.text == "down")
            #expect(try apiRequest(apiPort, "GET", "/proxies/media").1.contains(#""listen":"udp://127.0.0.1:"#))
            let (updated, updatedBody) = try apiRequest(apiPort, "POST", "/proxies/media", body: #"{"enabled": false}"#)
            #expect(updated == 200 && updatedBody.contains(#""upstream":"udp://"#), "\(updatedBody)")
            for (request, reason) in [
                (#"{"name": "m2", "listen": "tcp://127.0.0.1:0", "upstream": "udp://127.0.0.1:9"}"#, "a proxy relays one transport"),
                (#"{"name": "m3", "upstream": "udp://127.0.0.1:9", "tls": {"upstream": "insecure"}}"#, "a udp:// proxy carries no TLS"),
                (#"{"name": "m4", "upstream": "sctp://127.0.0.1:9"}"#, "unknown scheme"),
            ] {
                let (status, answer) = try apiRequest(apiPort, "POST", "/proxies", body: request)
                #expect(status == 400 && answer.contains(reason), "\(request): \(status) \(answer)")
            }
        }
        await api.stop()
        await harness.shutdown()
    }
}
