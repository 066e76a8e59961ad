import ChaosCore
import Foundation
import Synchronization
import Testing

@testable import ChaosControl
@testable import ChaosProxy

/// The live page's routes on the control API: the page, its figures pushed as Server-Sent Events, its streams page,
/// and its controls (pause and resume the schedule, stop), each written down for the report; under a token, the
/// page itself loads and nothing else does without it.
@Suite("Control API: the live page's routes", .serialized, .timeLimit(.minutes(5)))
struct ControlAPILiveTests {
    /// What the run hands the API, and what the API asked of it.
    final class Run: Sendable {
        let clock = RunClock()
        let schedule: FaultSchedule
        let manual: ManualActions
        let stopped = Mutex(0)
        let asked = Mutex<[String]>([])
        let pushes = Mutex(0)

        init() {
            schedule = FaultSchedule(clock: clock)
            manual = ManualActions(clock: clock)
        }

        var extras: ControlAPI.Extras {
            var extras = ControlAPI.Extras()
            extras.liveState = { [self] in
                let count = pushes.withLock {
                    $0 += 1
                    return $0
                }
                return #"{"scenario":"live","pushed":\#(count)}"# + "\n"
            }
            extras.liveStreams = { [self] page, search in
                asked.withLock { $0.append("\(page) \(search)") }
                return #"{"rows":[]}"#
            }
            extras.schedule = schedule
            extras.manual = manual
            extras.stop = { [self] in stopped.withLock { $0 += 1 } }
            return extras
        }
    }

    static func withAPI(_ run: Run?, access: APIAccess = .open, _ body: @escaping @Sendable (Int) throws -> Void) async throws {
        let harness = try await ProxyHarness()
        let factory = ProxyFactory(group: harness.group, sink: nil, clock: RunClock(), seed: SeededGenerator(seed: 0))
        let api = ControlAPI(proxies: [harness.proxy], factory: factory, extras: run?.extras ?? ControlAPI.Extras(), access: access)
        let address = try await api.start(host: "127.0.0.1", port: 0)
        let port = try #require(Int(address.split(separator: ":").last ?? ""))
        try await offPool { try body(port) }
        await api.stop()
        await harness.shutdown()
    }

    @Test(
        "the page, its figures and streams; pause, pause again (409), resume (how long), resume again (409), a fault and a stop: each written down in order"
    )
    func routesAndControls() async throws {
        let run = Run()
        try await Self.withAPI(run) { port throws in
            let (page, html) = try apiRequest(port, "GET", "/ui")
            #expect(page == 200 && html.contains("<title>chaos: live</title>") && html.contains("/ui/events"), "\(page)")
            #expect(try apiRequest(port, "GET", "/ui/state").1.contains(#""scenario":"live""#))
            #expect(try apiRequest(port, "GET", "/ui/streams?page=2&q=c%201+x").0 == 200)
            #expect(run.asked.withLock { $0 } == ["2 c 1 x"])
            #expect(try apiRequest(port, "GET", "/ui/streams?page=-1").0 == 400)
            let (paused, pausedBody) = try apiRequest(port, "POST", "/schedule/pause")
            #expect(paused == 200 && pausedBody.contains(#""paused":true"#), "\(pausedBody)")
            #expect(try apiRequest(port, "POST", "/schedule/pause").0 == 409)
            #expect(run.schedule.isPausedByHand)
            Thread.sleep(forTimeInterval: 0.2)
            let (resumed, resumedBody) = try apiRequest(port, "POST", "/schedule/resume")
            #expect(resumed == 200 && resumedBody.contains("paused_for_s"), "\(resumedBody)")
            #expect(try apiRequest(port, "POST", "/schedule/resume").0 == 409)
            let lasted = run.schedule.pauses(through: run.schedule.now).spans.first?.lasts ?? .zero
            #expect(lasted >= .milliseconds(200), "\(lasted)")
            #expect(try apiRequest(port, "POST", "/faults", body: #"{"disconnect": {"mode": "reset"}}"#).0 == 201)
            #expect(try apiRequest(port, "POST", "/stop").0 == 202)
            for _ in 0..<50 where run.stopped.withLock({ $0 }) == 0 { Thread.sleep(forTimeInterval: 0.05) }
            #expect(run.stopped.withLock { $0 } == 1)
            #expect(run.manual.all.map(\.action) == [.pause, .resume, .fault, .stop], "\(run.manual.all)")
            #expect(run.manual.all[2].detail == #"{"disconnect": {"mode": "reset"}}"#)
        }
    }

    @Test("GET /ui/events pushes the figures as Server-Sent Events at once and every second, one line of JSON each")
    func pushedFigures() async throws {
        let run = Run()
        try await Self.withAPI(run) { port throws in
            let socket = try TestSocket.connect(port: port, timeout: 10)
            defer { socket.close() }
            try socket.sendAll(Array("GET /ui/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            var text = ""
            let deadline = Date().addingTimeInterval(10)
            while text.components(separatedBy: "event: state\n").count < 3, Date() < deadline {
                guard case .bytes(let bytes) = socket.receive() else { break }
                text += String(decoding: bytes, as: UTF8.self)
            }
            #expect(text.hasPrefix("HTTP/1.1 200 OK") && text.lowercased().contains("content-type: text/event-stream"), "\(text.prefix(300))")
            #expect(text.contains(#"data: {"scenario":"live","pushed":1}"# + "\n\n"), "\(text)")
            #expect(text.contains(#"data: {"scenario":"live","pushed":2}"# + "\n\n"), "\(text)")
        }
    }

    @Test("when the API stops (the run is over), a live page's stream is closed: its figures end with the run")
    func streamEndsWithTheAPI() async throws {
        let run = Run()
        let harness = try await ProxyHarness()
        let factory = ProxyFactory(group: harness.group, sink: nil, clock: RunClock(), seed: SeededGenerator(seed: 0))
        let api = ControlAPI(proxies: [harness.proxy], factory: factory, extras: run.extras)
        let address = try await api.start(host: "127.0.0.1", port: 0)
        let port = try #require(Int(address.split(separator: ":").last ?? ""))
        let socket = try await offPool { () throws -> TestSocket in
            let socket = try TestSocket.connect(port: port, timeout: 10)
            try socket.sendAll(Array("GET /ui/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            var text = ""
            while !text.contains("event: state"), case .bytes(let bytes) = socket.receive() { text += String(decoding: bytes, as: UTF8.self) }
            return socket
        }
        await api.stop()
        let (_, end) = try await offPool { socket.receiveUntilEnd() }
        #expect(end == .eof, "the stream closed with the API: \(end)")
        socket.close()
        await harness.shutdown()
    }

    @Test("an API that serves no run: the page loads and says so; its figures and controls are 404")
    func noRun() async throws {
        try await Self.withAPI(nil) { port throws in
            #expect(try apiRequest(port, "GET", "/ui").0 == 200)
            for (method, path) in [("GET", "/ui/state"), ("GET", "/ui/streams"), ("POST", "/schedule/pause"), ("POST", "/stop")] {
                let (status, body) = try apiRequest(port, method, path)
                #expect(
                    status == 404 && body.contains("no run here") || status == 404 && body.contains("nothing to stop"),
                    "\(method) \(path): \(status) \(body)"
                )
            }
        }
    }

    @Test("behind a token the page itself loads; its figures, stream and controls are 401 without the token and answered with it")
    func tokenRule() async throws {
        let file = NSTemporaryDirectory() + "chaos-live-token-\(UUID().uuidString)"
        try (ControlAPIAccessTests.token + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let run = Run()
        try await Self.withAPI(run, access: try APIAccess(tokenFile: file, metricsOpen: false)) { port throws in
            #expect(try apiRequest(port, "GET", "/ui").0 == 200)
            for (method, path) in [
                ("GET", "/ui/state"), ("GET", "/ui/streams"), ("GET", "/ui/events"), ("POST", "/schedule/pause"), ("POST", "/schedule/resume"),
                ("POST", "/stop"), ("POST", "/faults"),
            ] {
                #expect(try apiRequest(port, method, path).0 == 401, "\(method) \(path)")
            }
            let right = ["Authorization: Bearer \(ControlAPIAccessTests.token)"]
            #expect(try apiRequest(port, "GET", "/ui/state", headers: right).0 == 200)
            #expect(try apiRequest(port, "POST", "/schedule/pause", headers: right).0 == 200)
            #expect(run.stopped.withLock { $0 } == 0 && run.manual.all.map(\.action) == [.pause])
        }
    }
}
