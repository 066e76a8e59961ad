import ChaosCore
import Foundation
import Glibc

/// The few HTTP/1.1 GETs a merge makes to an agent's control API (`http://HOST:PORT`): one request per connection,
/// blocking, with a timeout, the bearer token when given. Enough for `/events` pages and `/run/` files; never HTTPS
/// (put the agents' API behind the cluster's network, or port-forward).
struct AgentHTTP {
    let host: String
    let port: Int
    let token: String?
    /// The URL as the user gave it, for messages.
    let url: String

    /// What a GET answered.
    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
    }

    /// `http://HOST:PORT` (a trailing slash allowed); anything else is bad input naming it.
    init(url: String, token: String?) throws {
        guard url.hasPrefix("http://") else {
            throw ChaosError.badInput("agent URL \(url): only http://HOST:PORT is supported (the agent's --metrics address)")
        }
        var rest = url.dropFirst("http://".count)
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port),
            !rest[..<colon].isEmpty, !rest.contains("/")
        else {
            throw ChaosError.badInput("agent URL \(url): expected http://HOST:PORT")
        }
        host = String(rest[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        self.port = port
        self.token = token
        self.url = url
    }

    /// GETs `path` (with its query); fails as bad input naming the agent when it cannot be reached or answers garbage.
    func get(_ path: String, timeout: Int = 30) throws -> Answer {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, "\(port)", &hints, &list) == 0, let first = list else {
            throw ChaosError.badInput("agent URL \(url): cannot resolve \(host)")
        }
        defer { freeaddrinfo(list) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { throw ChaosError.badInput("agent URL \(url): no socket (errno \(errno))") }
        defer { close(fd) }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            throw ChaosError.badInput("agent URL \(url): cannot connect (\(String(cString: strerror(errno))))")
        }
        var request = "GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n"
        if let token { request += "Authorization: Bearer \(token)\r\n" }
        request += "\r\n"
        let bytes = Array(request.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { throw ChaosError.badInput("agent URL \(url): the request could not be sent") }
            sent += count
        }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 {
                guard !response.isEmpty else { throw ChaosError.badInput("agent URL \(url): \(Self.closedUnanswered) GET \(path)") }
                break
            }
            guard count > 0 else {
                let timedOut = errno == EAGAIN || errno == EWOULDBLOCK
                throw ChaosError.badInput(
                    timedOut
                        ? "agent URL \(url): no answer to GET \(path) within \(timeout) s"
                        : "agent URL \(url): \(Self.closedUnanswered) GET \(path) (\(String(cString: strerror(errno))))"
                )
            }
            response += chunk[0..<count]
            guard response.count <= 80 << 20 else { throw ChaosError.badInput("agent URL \(url): an answer over 80 MB to GET \(path)") }
        }
        return try parse(response, path: path)
    }

    /// How a connection the agent accepted and then closed or reset without an answer is told: what an agent whose
    /// API is closing and opening again (between its run and `--hold`) does to a request caught in between.
    static let closedUnanswered = "the connection closed before an answer to"

    private func parse(_ response: [UInt8], path: String) throws -> Answer {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = (0..<max(response.count - 3, 0)).first(where: { Array(response[$0..<($0 + 4)]) == separator }) else {
            throw ChaosError.badInput("agent URL \(url): GET \(path) got no HTTP answer")
        }
        let lines = String(decoding: response[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines.first?.split(separator: " ") ?? []
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]) else {
            throw ChaosError.badInput("agent URL \(url): GET \(path) got no HTTP status line")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = Array(response[(end + 4)...])
        if let length = headers["content-length"].flatMap(Int.init) {
            guard body.count >= length else { throw ChaosError.badInput("agent URL \(url): GET \(path) was cut short") }
            body = Array(body.prefix(length))
        }
        return Answer(status: status, headers: headers, body: body)
    }
}
