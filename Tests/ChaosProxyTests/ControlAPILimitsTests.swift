import ChaosCore
import Foundation
import Glibc
import Testing

@testable import ChaosControl
@testable import ChaosProxy

/// The control API reads bounded requests, in bounded time, from a bounded number of clients.
@Suite("HTTP control API limits", .serialized, .timeLimit(.minutes(5)))
struct ControlAPILimitsTests {
    /// Sends `head` and `body` bytes; returns the status code and the whole response.
    func exchange(_ port: Int, head: String, body: [UInt8]) throws -> (Int, String) {
        let socket = try TestSocket.connect(port: port)
        defer { socket.close() }
        try? socket.sendAll(Array(head.utf8) + body)
        let (bytes, _) = socket.receiveUntilEnd()
        let response = String(decoding: bytes, as: UTF8.self)
        return (Int(response.split(separator: " ").dropFirst().first ?? "") ?? 0, response)
    }

    func post(_ length: Int) -> String {
        "POST /faults HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: \(length)\r\n\r\n"
    }

    func withAPI(_ body: @escaping @Sendable (ProxyHarness, Int) throws -> Void) async throws {
        try await withControlAPI(body)
    }

    @Test("a 70 KB body that is a valid fault followed by garbage is refused whole (400), not cut and installed")
    func noSilentTruncation() async throws {
        try await withAPI { harness, port in
            let body =
                Array(#"{"latency": {"add": "100ms"}}"#.utf8) + [UInt8](repeating: UInt8(ascii: " "), count: 70_000)
                + Array("garbage".utf8)
            let (status, response) = try exchange(port, head: post(body.count), body: body)
            #expect(status == 400, "\(response.prefix(300))")
            let (_, faults) = try exchange(port, head: "GET /faults HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", body: [])
            #expect(faults.contains(#""faults":[]"#), "nothing was installed: \(faults)")
        }
    }

    @Test("a body over 1 MiB gets 413 from its Content-Length, without being read or echoed")
    func tooLarge() async throws {
        try await withAPI { _, port in
            let body = [UInt8](repeating: UInt8(ascii: "x"), count: 2 << 20)
            let (status, response) = try exchange(port, head: post(body.count), body: body)
            #expect(status == 413)
            #expect(response.count < 2_000, "the error does not echo the body (\(response.count) bytes)")
            // Chunked: no length up front, the limit is met while reading.
            let chunked = "POST /faults HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            let chunk = Array(String(format: "%x\r\n", 1 << 16).utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 16) + Array("\r\n".utf8)
            let (status2, _) = try exchange(port, head: chunked, body: Array((0..<20).map { _ in chunk }.joined()))
            #expect(status2 == 413)
        }
    }

    @Test("a 2 MiB body gets its 413 every time: the API reads and drops the rest before closing (never a reset before the answer is read)")
    func tooLargeIsAnsweredNotReset() async throws {
        try await withAPI { _, port in
            let body = [UInt8](repeating: UInt8(ascii: "x"), count: 2 << 20)
            for attempt in 1...10 {
                let socket = try TestSocket.connect(port: port)
                defer { socket.close() }
                // The whole body goes out (no EPIPE or reset while the API answers), and the answer is there after it.
                #expect(throws: Never.self, "attempt \(attempt)") { try socket.sendAll(Array(post(body.count).utf8) + body) }
                let (bytes, ended) = socket.receiveUntilEnd()
                let response = String(decoding: bytes, as: UTF8.self)
                #expect(response.hasPrefix("HTTP/1.1 413 "), "attempt \(attempt): \(ended) \(response.prefix(200))")
            }
        }
    }

    @Test("a repeating API fault, even every millisecond, answers at once and lasts until deleted; one faster than 1 ms is refused")
    func repeatingFault() async throws {
        try await withAPI { _, port in
            let body = Array(#"{"disconnect": {"every": "1s"}}"#.utf8)
            let (status, response) = try exchange(port, head: post(body.count), body: body)
            #expect(status == 201, "\(response.prefix(300))")
            // Its timeline is drawn as time reaches it: no cap on repeats, no memory spent ahead.
            let often = Array(#"{"latency": {"every": "1ms", "for": "1ms", "add": "1ms"}}"#.utf8)
            let (accepted, timeline) = try exchange(port, head: post(often.count), body: often)
            #expect(accepted == 201, "\(timeline.prefix(300))")
            // The first 20 still to come (times count from the proxy's start; those over by the request are skipped).
            #expect(
                timeline.components(separatedBy: "latency     for 1ms").count - 1 == 20,
                "the first 20 occurrences are listed: \(timeline.suffix(600))"
            )
            usleep(300_000)
            let list = "GET /faults HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            let (listed, faults) = try exchange(port, head: list, body: [])
            #expect(listed == 200)
            #expect(faults.contains("every") && faults.contains("1ms"), "\(faults.suffix(400))")
            let fast = Array(#"{"disconnect": {"every": "1ns"}}"#.utf8)
            let (refused, reason) = try exchange(port, head: post(fast.count), body: fast)
            #expect(refused == 400)
            #expect(reason.contains("at least 1ms"), "\(reason.suffix(300))")
        }
    }

    @Test("a request that never completes gets 408 and is closed")
    func slowRequest() async throws {
        try await withAPI { _, port in
            // The socket waits longer than the API's 10 s request timeout: with equal timeouts the read could give up
            // just before the 408 came (seen on a loaded machine).
            let socket = try TestSocket.connect(port: port, timeout: 25)
            defer { socket.close() }
            try socket.sendAll(Array("POST /faults HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{".utf8))
            let started = Date()
            let (bytes, _) = socket.receiveUntilEnd()
            #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/1.1 408"))
            #expect(Date().timeIntervalSince(started) < 20)
        }
    }

    @Test("an idle connection, before its first request or after a kept-alive answer, is closed in time without an answer")
    func idleConnections() async throws {
        try await withAPI { _, port in
            let silent = try TestSocket.connect(port: port)
            defer { silent.close() }
            let kept = try TestSocket.connect(port: port)
            defer { kept.close() }
            try kept.sendAll(Array("GET /version HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            let (answered, _) = kept.receiveUntilEnd()
            let text = String(decoding: answered, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 200") && !text.contains("408"), "\(text)")
            #expect(silent.receiveUntilEnd().0.isEmpty)
            let (status, _) = try exchange(port, head: "GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", body: [])
            #expect(status == 200, "the API goes on")
        }
    }

    @Test("past the allowed concurrent connections, a new one takes the place of the one that waited longest")
    func boundedConnections() async throws {
        try await withAPI { _, port in
            var held: [TestSocket] = []
            // Each answered in turn and kept alive: they wait in this order, the first the longest.
            for _ in 0..<ControlAPI.maxConnections {
                let socket = try TestSocket.connect(port: port)
                try socket.sendAll(Array("GET /version HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
                #expect(String(decoding: socket.receive(exactly: 17), as: UTF8.self) == "HTTP/1.1 200 OK\r\n")
                held.append(socket)
            }
            let (status, _) = try exchange(port, head: "GET /faults HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", body: [])
            #expect(status == 200, "the new connection is served")
            // The rest of its first answer, then the end: it was closed, and no second answer came.
            let (bytes, end) = held[0].receiveUntilEnd()
            #expect(end == .eof && !String(decoding: bytes, as: UTF8.self).contains("HTTP/1.1"), "the longest waiting one was closed: \(end)")
            for socket in held { socket.close() }
        }
    }

    @Test("150 connections that send half a request and stall do not lock a real client out")
    func slowConnectionsDoNotLockOut() async throws {
        try await withAPI { _, port in
            var stalled: [TestSocket] = []
            defer { for socket in stalled { socket.close() } }
            for _ in 0..<150 {
                let socket = try TestSocket.connect(port: port)
                try? socket.sendAll(Array("POST /faults HTTP/1.1\r\nHost: x\r\nContent-Le".utf8))
                stalled.append(socket)
            }
            let socket = try TestSocket.connect(port: port, timeout: 30)
            defer { socket.close() }
            try socket.sendAll(Array("GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
            let answer = String(decoding: socket.receiveUntilEnd().0, as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 200") && answer.contains("2.12.0-chaos"), "\(answer.prefix(200))")
        }
    }
}
