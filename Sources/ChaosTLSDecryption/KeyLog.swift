import ChaosCore
import Foundation

/// An NSS key log (the `SSLKEYLOGFILE` format curl, Chrome, Firefox, Python's `keylog_filename`, Go's `KeyLogWriter`,
/// OpenSSL's `-keylogfile` and chaos's own `keys.log` write): per TLS connection, keyed by its ClientHello's random,
/// the TLS 1.2 master secret or the TLS 1.3 traffic secrets.
///
/// Each line is `LABEL <client random in hex> <secret in hex>`; `#` starts a comment, blank lines are skipped, and
/// labels this reader has no use for (`EXPORTER_SECRET`, `CLIENT_EARLY_TRAFFIC_SECRET`, `RSA` …) are kept out.
package struct KeyLog: Hashable, Sendable {
    /// The secrets of one connection.
    package struct Secrets: Hashable, Sendable {
        /// TLS 1.2: `CLIENT_RANDOM`, the 48-byte master secret.
        package var masterSecret: [UInt8]?
        /// TLS 1.3: `CLIENT_HANDSHAKE_TRAFFIC_SECRET`.
        package var clientHandshake: [UInt8]?
        /// TLS 1.3: `SERVER_HANDSHAKE_TRAFFIC_SECRET`.
        package var serverHandshake: [UInt8]?
        /// TLS 1.3: `CLIENT_TRAFFIC_SECRET_0`.
        package var clientTraffic: [UInt8]?
        /// TLS 1.3: `SERVER_TRAFFIC_SECRET_0`.
        package var serverTraffic: [UInt8]?

        /// No secret yet.
        package init() {}
    }

    /// By client random.
    private var entries: [[UInt8]: Secrets] = [:]

    /// How many connections it holds secrets for.
    package var count: Int { entries.count }

    /// An empty key log.
    package init() {}

    /// The secrets logged for the connection whose ClientHello carried `clientRandom`.
    package func secrets(for clientRandom: [UInt8]) -> Secrets? { entries[clientRandom] }

    /// Reads `path` (and adds it to what is already read).
    /// - Throws: `ChaosError.badInput` naming the file, and the line and column of the first malformed line.
    package mutating func read(path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ChaosError.badInput("key log \(path): cannot be read (missing, or not a file)")
        }
        try add(text: [UInt8](data), source: path)
    }

    /// Adds the lines of `text` (`source` names it in messages).
    package mutating func add(text: [UInt8], source: String) throws {
        var lineNumber = 0
        var start = 0
        while start < text.count {
            lineNumber += 1
            var end = start
            while end < text.count, text[end] != 0x0A { end += 1 }
            var line = text[start..<end]
            start = end + 1
            if line.last == 0x0D { line = line.dropLast() }
            try addLine(line, source: source, number: lineNumber)
        }
    }

    private mutating func addLine(_ line: ArraySlice<UInt8>, source: String, number: Int) throws {
        let trimmed = line.drop { $0 == 0x20 || $0 == 0x09 }
        guard let first = trimmed.first, first != UInt8(ascii: "#") else { return }
        let fields = trimmed.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 })
        func bad(_ why: String, column: Int) -> ChaosError {
            .badInput("key log \(source):\(number):\(column): \(why) (expected LABEL CLIENT_RANDOM SECRET, in hex)")
        }
        let labelColumn = trimmed.startIndex - line.startIndex + 1
        guard fields.count == 3 else {
            if fields.count < 3 { throw bad("\(fields.count) field(s)", column: labelColumn) }
            throw bad("\(fields.count) fields", column: fields[3].startIndex - line.startIndex + 1)
        }
        guard let label = String(validating: fields[0], as: UTF8.self),
            label.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber || $0 == "_") })
        else {
            throw bad("the label is not an upper-case name", column: labelColumn)
        }
        let randomColumn = fields[1].startIndex - line.startIndex + 1
        guard let random = Self.hex(fields[1]) else { throw bad("the client random is not hex", column: randomColumn) }
        let secretColumn = fields[2].startIndex - line.startIndex + 1
        guard let secret = Self.hex(fields[2]) else { throw bad("the secret is not hex", column: secretColumn) }
        // `RSA` lines key by the encrypted pre-master secret's first 8 bytes, not by a client random.
        guard label != "RSA" else { return }
        guard random.count == 32 else { throw bad("a client random of \(random.count) bytes, not 32", column: randomColumn) }
        var secrets = entries[random] ?? Secrets()
        switch label {
        case "CLIENT_RANDOM":
            guard secret.count == 48 else { throw bad("a master secret of \(secret.count) bytes, not 48", column: secretColumn) }
            secrets.masterSecret = secret
        case "CLIENT_HANDSHAKE_TRAFFIC_SECRET": secrets.clientHandshake = try Self.trafficSecret(secret) { bad($0, column: secretColumn) }
        case "SERVER_HANDSHAKE_TRAFFIC_SECRET": secrets.serverHandshake = try Self.trafficSecret(secret) { bad($0, column: secretColumn) }
        case "CLIENT_TRAFFIC_SECRET_0": secrets.clientTraffic = try Self.trafficSecret(secret) { bad($0, column: secretColumn) }
        case "SERVER_TRAFFIC_SECRET_0": secrets.serverTraffic = try Self.trafficSecret(secret) { bad($0, column: secretColumn) }
        default: return  // EXPORTER_SECRET, CLIENT_EARLY_TRAFFIC_SECRET, EARLY_EXPORTER_SECRET…: not needed
        }
        entries[random] = secrets
    }

    private static func trafficSecret(_ secret: [UInt8], _ bad: (String) -> ChaosError) throws -> [UInt8] {
        guard secret.count == 32 || secret.count == 48 else {
            throw bad("a traffic secret of \(secret.count) bytes, not 32 (SHA-256) or 48 (SHA-384)")
        }
        return secret
    }

    private static func hex(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        guard text.count % 2 == 0, !text.isEmpty else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count / 2)
        var high: UInt8?
        for character in text {
            let nibble: UInt8
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = character - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = character - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = character - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let value = high {
                bytes.append(value << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return bytes
    }
}
