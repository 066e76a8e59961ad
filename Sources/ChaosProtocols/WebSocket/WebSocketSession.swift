/// What the upgrade handshake of one WebSocket connection decided, shared by the decoders of its four legs
/// (both directions, as read and as written): the client's request (for `stream: header:NAME` / `query:NAME`)
/// and the permessage-deflate parameters the server accepted.
final class WebSocketSession {
    /// The request target (`/path?query`), once the client's upgrade request was read.
    private(set) var target: String?
    /// The request's headers, names lowercased, in order.
    private(set) var headers: [(name: String, value: String)] = []
    /// The server's answer: nil until read; true for 101 Switching Protocols.
    private(set) var accepted: Bool?
    /// The negotiated permessage-deflate, when the server accepted it.
    private(set) var deflate: PerMessageDeflate?

    /// Records the client's request (the first leg to read it wins; the others saw the same bytes).
    func requested(target: String, headers: [(name: String, value: String)]) {
        guard self.target == nil else { return }
        self.target = target
        self.headers = headers
    }

    /// Records the server's answer.
    func answered(status: Int, headers: [(name: String, value: String)]) {
        guard accepted == nil else { return }
        accepted = status == 101
        guard status == 101 else { return }
        for header in headers where header.name == "sec-websocket-extensions" {
            if let negotiated = PerMessageDeflate(accepted: header.value) {
                deflate = negotiated
                break
            }
        }
    }

    /// The value of the request header `name` (case-insensitive), if the request had it.
    func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }

    /// The value of the query parameter `name` of the request target (percent-decoded), if present.
    func query(_ name: String) -> String? {
        guard let target, let mark = target.firstIndex(of: "?") else { return nil }
        for pair in target[target.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard Self.percentDecoded(parts[0]) == name else { continue }
            return parts.count > 1 ? Self.percentDecoded(parts[1]) : ""
        }
        return nil
    }

    private static func percentDecoded(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
                continue
            }
            guard byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            else {
                bytes.append(byte)
                continue
            }
            bytes.append(value)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// permessage-deflate (RFC 7692) as the server accepted it in `Sec-WebSocket-Extensions`.
struct PerMessageDeflate: Equatable {
    /// The server resets its compressor after each message (`server_no_context_takeover`): downstream.
    var serverNoContextTakeover = false
    /// The client resets its compressor after each message (`client_no_context_takeover`): upstream.
    var clientNoContextTakeover = false
    /// The server's LZ77 window (`server_max_window_bits`, 8...15, default 15).
    var serverMaxWindowBits = 15
    /// The client's LZ77 window (`client_max_window_bits`, 8...15, default 15).
    var clientMaxWindowBits = 15

    /// Parameters as given (the defaults are RFC 7692's).
    init(
        serverNoContextTakeover: Bool = false,
        clientNoContextTakeover: Bool = false,
        serverMaxWindowBits: Int = 15,
        clientMaxWindowBits: Int = 15
    ) {
        self.serverNoContextTakeover = serverNoContextTakeover
        self.clientNoContextTakeover = clientNoContextTakeover
        self.serverMaxWindowBits = serverMaxWindowBits
        self.clientMaxWindowBits = clientMaxWindowBits
    }

    /// Reads the accepted extension from a response's `Sec-WebSocket-Extensions` value; nil when it does not
    /// accept permessage-deflate (or names a parameter or value RFC 7692 does not allow).
    init?(accepted value: String) {
        for offer in value.split(separator: ",") {
            let parts = offer.split(separator: ";").map { $0.trimmingSpaces }
            guard parts.first?.lowercased() == "permessage-deflate" else { continue }
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingSpaces }
                let name = pair[0].lowercased()
                let bits = pair.count > 1 ? Int(pair[1].trimming("\"")) : nil
                switch name {
                case "server_no_context_takeover": serverNoContextTakeover = true
                case "client_no_context_takeover": clientNoContextTakeover = true
                case "server_max_window_bits":
                    guard let bits, (8...15).contains(bits) else { return nil }
                    serverMaxWindowBits = bits
                case "client_max_window_bits":
                    if let bits {
                        guard (8...15).contains(bits) else { return nil }
                        clientMaxWindowBits = bits
                    }
                default: return nil
                }
            }
            return
        }
        return nil
    }

    /// Whether the producer of `upstream` (client → server) or downstream messages resets its context per message.
    func noContextTakeover(upstream: Bool) -> Bool { upstream ? clientNoContextTakeover : serverNoContextTakeover }

    /// The window to inflate with: the negotiated one, but at least 9 (zlib's deflate turns a raw window of 8 into 9).
    func windowBits(upstream: Bool) -> Int { max(9, upstream ? clientMaxWindowBits : serverMaxWindowBits) }
}

extension Substring {
    var trimmingSpaces: String { String(self).trimming(" \t") }
}

extension String {
    /// The string without leading and trailing `characters`.
    func trimming(_ characters: String) -> String {
        let set = Set(characters)
        guard let first = firstIndex(where: { !set.contains($0) }), let last = lastIndex(where: { !set.contains($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
