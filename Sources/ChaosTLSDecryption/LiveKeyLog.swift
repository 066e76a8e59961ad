import ChaosCore
import Foundation
import Glibc

/// Key logs a pair writes while a run goes on (a QUIC stack logs each connection's secrets during its handshake, before
/// it sends under them): a lookup reads the files again when they grew (a stat each), so a connection's secrets are
/// found as soon as its stack wrote them. A file missing or cut mid-line for now is read again later; what was read stays.
package final class LiveKeyLog {
    private let paths: [String]
    private var keys = KeyLog()
    /// The sizes the files had when last read.
    private var sizes: [Int]

    /// Key logs at `paths`, read when first asked.
    package init(paths: [String]) {
        self.paths = paths
        sizes = Array(repeating: -1, count: paths.count)
    }

    /// The secrets logged so far for the connection whose ClientHello carried `clientRandom` (a stack logs its
    /// handshake secrets before its traffic secrets: asked again, the files are read again when they grew).
    package func secrets(for clientRandom: [UInt8]) -> KeyLog.Secrets? {
        let now = paths.map(Self.size(of:))
        guard now != sizes else { return keys.secrets(for: clientRandom) }
        var fresh = KeyLog()
        var read: [Int] = []
        for path in paths {
            guard let data = FileManager.default.contents(atPath: path) else {
                read.append(-1)
                continue
            }
            // A line being written is cut short: read up to the last whole line (and read it whole next time).
            var bytes = [UInt8](data)
            while let last = bytes.last, last != 0x0A { bytes.removeLast() }
            read.append(bytes.count)
            try? fresh.add(text: bytes, source: path)
        }
        sizes = read
        if fresh.count >= keys.count { keys = fresh }
        return keys.secrets(for: clientRandom)
    }

    /// The size of `path` (-1: none): a stat, cheap enough for every miss.
    private static func size(of path: String) -> Int {
        var status = stat()
        guard stat(path, &status) == 0 else { return -1 }
        return Int(status.st_size)
    }
}
