import Foundation
import Glibc
import Testing

@testable import ChaosRunner

/// `chaos report --merge http://AGENT:PORT` against an agent whose control API closes and opens again (between its run
/// and `--hold`): a request the kernel queued for the closing API is reset unanswered, and the merge asks again; a
/// request nobody answers is still a timeout, named as one.
@Suite("An agent's API that closes and opens again, seen from the merge", .serialized, .timeLimit(.minutes(5)))
struct AgentHTTPTests {
    /// A listening socket on 127.0.0.1 (an ephemeral port, or `port`) that accepts nothing by itself.
    static func listener(port: UInt16 = 0) throws -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0 && listen(fd, 8) == 0, "bind/listen: errno \(errno)")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &length) }
        }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    /// Accepts one connection on `fd`, reads its request head and answers 200 with `body`.
    static func answerOnce(_ fd: Int32, body: String) {
        let connection = accept(fd, nil, nil)
        guard connection >= 0 else { return }
        defer { close(connection) }
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: request, as: UTF8.self).contains("\r\n\r\n") {
            let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            request += buffer[0..<count]
        }
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
        _ = answer.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Runs `body` on its own thread (the calls block: never on the test's cooperative pool); `wait()` returns its result.
    final class Blocking<Value: Sendable>: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private var value: Value?

        init(_ body: @escaping @Sendable () -> Value) {
            let thread = Thread { [self] in
                value = body()
                done.signal()
            }
            thread.start()
        }

        func wait() -> Value? {
            _ = done.wait(timeout: .now() + 45)
            return value
        }
    }

    @Test("a request queued for an API that closes is reset unanswered; the merge asks the API that opens again")
    func resetWhileRestartingIsAskedAgain() throws {
        let closing = try Self.listener()
        let agent = try AgentHTTP(url: "http://127.0.0.1:\(closing.port)", token: nil)
        let asking = Blocking { () -> String in
            do {
                let answer = try AgentDownload.pageAfterRestart(agent, "/events?since=0:0")
                return "\(answer.status) \(String(decoding: answer.body, as: UTF8.self))"
            } catch { return "\(error)" }
        }
        // The request is queued in the closing API's backlog (connected, sent, never accepted); closing resets it.
        usleep(300_000)
        close(closing.fd)
        usleep(200_000)
        let reopened = try Self.listener(port: closing.port)
        defer { close(reopened.fd) }
        let serving = Blocking { Self.answerOnce(reopened.fd, body: "page") }
        #expect(asking.wait() == "200 page")
        _ = serving.wait()
    }

    @Test("a reset is named as a connection closed before an answer; silence as no answer within the timeout")
    func resetAndSilenceAreToldApart() throws {
        let silent = try Self.listener()
        defer { close(silent.fd) }
        let agent = try AgentHTTP(url: "http://127.0.0.1:\(silent.port)", token: nil)
        do {
            _ = try agent.get("/clock", timeout: 1)
            Issue.record("a listener that accepts nothing answered")
        } catch {
            #expect("\(error)".contains("no answer to GET /clock within 1 s"), "\(error)")
        }
        let closing = try Self.listener()
        let reset = try AgentHTTP(url: "http://127.0.0.1:\(closing.port)", token: nil)
        let asking = Blocking { () -> String in
            do {
                _ = try reset.get("/clock", timeout: 10)
                return "answered"
            } catch { return "\(error)" }
        }
        usleep(300_000)
        close(closing.fd)
        let message = asking.wait() ?? "no end"
        #expect(message.contains(AgentHTTP.closedUnanswered) && !message.contains("within"), "\(message)")
    }
}
