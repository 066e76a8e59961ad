/// A bounds-checked reader of big-endian numbers and length-prefixed vectors.
struct ByteReader {
    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    var isAtEnd: Bool { bytes.isEmpty }
    var rest: ArraySlice<UInt8> { bytes }

    mutating func number(_ count: Int) -> Int? {
        guard bytes.count >= count else { return nil }
        var value = 0
        for byte in bytes.prefix(count) { value = value << 8 | Int(byte) }
        bytes = bytes.dropFirst(count)
        return value
    }

    mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
        guard bytes.count >= count else { return nil }
        defer { bytes = bytes.dropFirst(count) }
        return bytes.prefix(count)
    }

    mutating func vector(lengthBytes: Int) -> ByteReader? {
        guard let length = number(lengthBytes), let body = take(length) else { return nil }
        return ByteReader(body)
    }
}

/// What the decryption needs of a ClientHello: its random (the key log's key), and whether it offered early data.
struct ClientHelloFacts: Equatable {
    var random: [UInt8]
    var offersEarlyData = false

    /// Reads a ClientHello's body (after the 4-byte handshake header).
    init?(body: ArraySlice<UInt8>) {
        var reader = ByteReader(body)
        guard reader.take(2) != nil, let random = reader.take(32), reader.vector(lengthBytes: 1) != nil,
            reader.vector(lengthBytes: 2) != nil, reader.vector(lengthBytes: 1) != nil
        else { return nil }
        self.random = Array(random)
        guard !reader.isAtEnd else { return }
        guard var extensions = reader.vector(lengthBytes: 2) else { return nil }
        while !extensions.isAtEnd {
            guard let type = extensions.number(2), extensions.vector(lengthBytes: 2) != nil else { return nil }
            if type == 42 { offersEarlyData = true }
        }
    }
}

/// What the decryption needs of a ServerHello: its random, the version and suite chosen, and (TLS 1.2) the ALPN.
struct ServerHelloFacts: Equatable {
    var random: [UInt8]
    var suite: UInt16
    /// 0x0304 for TLS 1.3 (from supported_versions), else the legacy version field.
    var version: Int
    var alpn: String?

    /// RFC 8446 §4.1.3: a ServerHello with this random is a HelloRetryRequest.
    static let retryRandom: [UInt8] = [
        0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
        0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
    ]

    var isRetryRequest: Bool { random == Self.retryRandom }

    /// Reads a ServerHello's body (after the 4-byte handshake header).
    init?(body: ArraySlice<UInt8>) {
        var reader = ByteReader(body)
        guard let legacy = reader.number(2), let random = reader.take(32), reader.vector(lengthBytes: 1) != nil,
            let suite = reader.number(2), reader.number(1) != nil
        else { return nil }
        self.random = Array(random)
        self.suite = UInt16(suite)
        version = legacy
        guard !reader.isAtEnd else { return }
        guard var extensions = reader.vector(lengthBytes: 2) else { return nil }
        while !extensions.isAtEnd {
            guard let type = extensions.number(2), var data = extensions.vector(lengthBytes: 2) else { return nil }
            switch type {
            case 43:  // supported_versions: the selected version
                guard let selected = data.number(2) else { return nil }
                version = selected
            case 16:
                alpn = Self.alpn(&data)
            default: break
            }
        }
    }

    /// The one protocol of a server's ALPN extension.
    static func alpn(_ data: inout ByteReader) -> String? {
        guard var names = data.vector(lengthBytes: 2), var name = names.vector(lengthBytes: 1) else { return nil }
        return String(decoding: name.take(name.rest.count) ?? [], as: UTF8.self)
    }
}

/// The ALPN protocol a TLS 1.3 EncryptedExtensions message carries (its body after the handshake header).
func encryptedExtensionsALPN(body: ArraySlice<UInt8>) -> String? {
    var reader = ByteReader(body)
    guard var extensions = reader.vector(lengthBytes: 2) else { return nil }
    while !extensions.isAtEnd {
        guard let type = extensions.number(2), var data = extensions.vector(lengthBytes: 2) else { return nil }
        if type == 16 { return ServerHelloFacts.alpn(&data) }
    }
    return nil
}
