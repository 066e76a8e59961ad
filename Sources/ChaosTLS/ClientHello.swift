/// What the proxy needs of a client's TLS ClientHello before it answers: the server name it asked for (SNI) and the
/// application protocols it offers (ALPN), so that the upstream is dialled with the same and the client is answered
/// with what the upstream chose. Read from the first bytes of the connection (TLS records of the handshake type,
/// the ClientHello possibly split over several); nothing here decrypts or checks anything.
package struct ClientHello: Sendable, Equatable {
    /// The SNI host name, if the client sent one.
    package var serverName: String?
    /// The ALPN protocols offered, in the client's order (empty: no ALPN extension).
    package var protocols: [String]

    /// The largest ClientHello read (its handshake message): larger ones are refused as not a ClientHello.
    package static let largest = 65_536

    /// What the first bytes of a connection say.
    package enum Parse: Sendable, Equatable {
        /// A whole ClientHello, and how many bytes (whole records) it took.
        case hello(ClientHello, consumed: Int)
        /// More bytes are needed.
        case incomplete
        /// Not a TLS ClientHello: why.
        case notTLS(String)
    }

    /// Reads a ClientHello from the start of `bytes`.
    package static func parse(_ bytes: [UInt8]) -> Parse {
        var handshake: [UInt8] = []
        var offset = 0
        // Gather the handshake records' payloads until the ClientHello's length is known and reached.
        while true {
            guard bytes.count >= offset + 5 else { return .incomplete }
            guard bytes[offset] == 22 else {
                return .notTLS(
                    offset == 0
                        ? "the first byte is \(bytes[offset]), not a TLS handshake record (22)"
                        : "a record of type \(bytes[offset]) inside the ClientHello"
                )
            }
            guard bytes[offset + 1] == 3 else { return .notTLS("record version \(bytes[offset + 1]).\(bytes[offset + 2]) is not TLS") }
            let length = Int(bytes[offset + 3]) << 8 | Int(bytes[offset + 4])
            guard length > 0, length <= 16_384 + 2_048 else { return .notTLS("a handshake record of \(length) bytes") }
            guard bytes.count >= offset + 5 + length else { return .incomplete }
            handshake += bytes[(offset + 5)..<(offset + 5 + length)]
            offset += 5 + length
            guard handshake.count >= 4 else { continue }
            guard handshake[0] == 1 else { return .notTLS("handshake message \(handshake[0]) is not a ClientHello (1)") }
            let size = Int(handshake[1]) << 16 | Int(handshake[2]) << 8 | Int(handshake[3])
            guard size <= largest else { return .notTLS("a ClientHello of \(size) bytes") }
            guard handshake.count >= 4 + size else { continue }
            guard let hello = body(handshake[4..<(4 + size)]) else { return .notTLS("a ClientHello that does not parse") }
            return .hello(hello, consumed: offset)
        }
    }

    /// The ClientHello's body: version, random, session id, cipher suites, compression methods, extensions.
    private static func body(_ body: ArraySlice<UInt8>) -> ClientHello? {
        var reader = Reader(bytes: body)
        guard reader.skip(2 + 32), reader.skipVector(lengthBytes: 1), reader.skipVector(lengthBytes: 2),
            reader.skipVector(lengthBytes: 1)
        else { return nil }
        var hello = ClientHello(serverName: nil, protocols: [])
        guard !reader.isAtEnd else { return hello }  // no extensions
        guard var extensions = reader.vector(lengthBytes: 2) else { return nil }
        while !extensions.isAtEnd {
            guard let type = extensions.number(bytes: 2), var data = extensions.vector(lengthBytes: 2) else { return nil }
            switch type {
            case 0:  // server_name: a list of (type, name); host_name is type 0
                guard var names = data.vector(lengthBytes: 2) else { return nil }
                while !names.isAtEnd {
                    guard let kind = names.number(bytes: 1), let name = names.vector(lengthBytes: 2) else { return nil }
                    if kind == 0, hello.serverName == nil { hello.serverName = String(decoding: name.rest, as: UTF8.self) }
                }
            case 16:  // application_layer_protocol_negotiation: a list of length-prefixed names
                guard var names = data.vector(lengthBytes: 2) else { return nil }
                while !names.isAtEnd {
                    guard let name = names.vector(lengthBytes: 1), !name.rest.isEmpty else { return nil }
                    hello.protocols.append(String(decoding: name.rest, as: UTF8.self))
                }
            default: break
            }
        }
        return hello
    }

    /// A bounds-checked reader of big-endian numbers and length-prefixed vectors.
    private struct Reader {
        var bytes: ArraySlice<UInt8>
        var isAtEnd: Bool { bytes.isEmpty }
        var rest: ArraySlice<UInt8> { bytes }

        mutating func skip(_ count: Int) -> Bool {
            guard bytes.count >= count else { return false }
            bytes = bytes.dropFirst(count)
            return true
        }

        mutating func number(bytes count: Int) -> Int? {
            guard bytes.count >= count else { return nil }
            let value = bytes.prefix(count).reduce(0) { $0 << 8 | Int($1) }
            bytes = bytes.dropFirst(count)
            return value
        }

        mutating func vector(lengthBytes: Int) -> Reader? {
            guard let length = number(bytes: lengthBytes), bytes.count >= length else { return nil }
            defer { bytes = bytes.dropFirst(length) }
            return Reader(bytes: bytes.prefix(length))
        }

        mutating func skipVector(lengthBytes: Int) -> Bool { vector(lengthBytes: lengthBytes) != nil }
    }
}
