import Foundation

/// Runs tshark's `follow,tcp,raw` on one stream and decodes the hex it prints.
enum Tshark {
    struct Follow {
        /// Bytes sent by the endpoint that tshark lists first (the one that opened the stream).
        var initiatorBytes: [UInt8] = []
        /// Bytes sent the other way (tshark indents them with a tab).
        var responderBytes: [UInt8] = []
    }

    static func follow(path: String, stream: Int) throws -> Follow {
        let output = try TestSupport.run("/usr/bin/tshark", ["-n", "-r", path, "-q", "-z", "follow,tcp,raw,\(stream)"])
        var follow = Follow()
        var inBody = false
        for line in output.stdout.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("Node 1:") {
                inBody = true
                continue
            }
            guard inBody, !line.hasPrefix("====") else { continue }
            if line.hasPrefix("\t") {
                follow.responderBytes += decodeHex(line.dropFirst())
            } else if !line.isEmpty {
                follow.initiatorBytes += decodeHex(line)
            }
        }
        return follow
    }

    private static func decodeHex(_ text: Substring) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count / 2)
        var high: UInt8?
        for char in text.utf8 {
            let value: UInt8
            switch char {
            case 48...57: value = char - 48
            case 97...102: value = char - 87
            case 65...70: value = char - 55
            default: continue
            }
            if let h = high {
                bytes.append(h << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }
}
