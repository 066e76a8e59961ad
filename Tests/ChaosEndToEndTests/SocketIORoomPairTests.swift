import Foundation
import Testing

/// A Socket.IO room through chaos (`protocol.fanout` over `framing: socketio`): Scenarios/socketio/socketio_room.py on
/// PyPI `python-socketio`, three members of one room that each send numbered `chat` events, which the server broadcasts
/// to the rest of the room (`emit(room=…, skip_sid=…)`), resuming after each cut (the server keeps the room's history
/// and replays what a returning member missed). What the server writes to each member is that member's own copy of
/// each sender's stream, named by the `user` of its query: the audit's copies equal what each member's log says it was
/// handed, and each sender's own stream what the server accepted.
@Suite("Socket.IO room: each member's copy of each sender's stream equals its log", .serialized, .timeLimit(.minutes(3)))
struct SocketIORoomPairTests {
    static let pair = ChaosCLI.packageRoot.appendingPathComponent("Scenarios/socketio/socketio_room.py").path

    static func scenario(listen: Int, upstream: Int, bug: String, transports: String) -> String {
        """
        name: socketio-room
        duration: 14s
        seed: 5
        proxies:
          - {name: room, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
        pair:
          server:
            run: python3 \(pair) server --listen 127.0.0.1:{upstream.port} --log {run_dir}/server.jsonl \(bug)
            ready: tcp 127.0.0.1:{upstream.port}
            stop_grace: 1s
          client:
            run: python3 \(pair) client --connect 127.0.0.1:{listen.port} --user u{index} --log {run_dir}/client-{index}.jsonl --rate 10 --send-for 9 --transports \(transports)
            count: 3
            ready: connected
            stop_grace: 1s
        protocol:
          framing: socketio
          format: json
          fanout: {sender: 1.from, seq: 1.n, receiver: query:user, resume: 1.seen}
          ack: 1.ack
          ignore: {type: [hello]}
        faults:
          - disconnect: {at: 2s, mode: reset}
          - partition: {at: 4s, for: 3s, direction: both}
          - disconnect: {at: 9s, mode: reset}
        expect:
          lost: 0
          duplicated: 0
        """
    }

    /// Runs the room with `bug` over `transports`, checked against the logs as the chat pair is.
    static func run(bug: String, transports: String) async throws -> ChatFanoutPairTests.Judged {
        let run = try await ThirdPartyPairRun.run("socketio-room", capture: false) {
            Self.scenario(listen: $0, upstream: $1, bug: bug, transports: transports)
        }
        return try ChatFanoutPairTests.judged(run.folder, status: run.status)
    }

    @Test(
        "a room server that replays what a returning member missed: every member got every message once, as its log says; the run passes",
        arguments: ["websocket", "both"]
    )
    func resumingServerPasses(transports: String) async throws {
        try ChatFanoutPairTests.expectPassed(try await Self.run(bug: "", transports: transports))
    }

    @Test(
        "a room server that skips the first message of each sender it hands a returning member: its losses equal the holes in its log; the run fails"
    )
    func skippingServerFails() async throws {
        try ChatFanoutPairTests.expectSkipsLost(try await Self.run(bug: "--drop-on-resume 1", transports: "websocket"), everyCopy: true)
    }
}
