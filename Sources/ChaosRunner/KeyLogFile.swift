import Foundation
import NIOCore
import Synchronization

/// A run folder's `keys.log`: the NSS key log lines of both legs of every TLS connection, appended as TLS writes
/// them (`CLIENT_RANDOM`, `CLIENT_HANDSHAKE_TRAFFIC_SECRET`, …), so that Wireshark or tshark decrypt a capture of
/// the run. Made 0600: the secrets open every connection of the run.
final class KeyLogFile: Sendable {
    private let handle: Mutex<FileHandle?>

    /// `keys.log` in `folder`.
    init(folder: URL) throws {
        let path = folder.appendingPathComponent("keys.log").path
        guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]),
            let handle = FileHandle(forWritingAtPath: path)
        else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
        }
        self.handle = Mutex(handle)
    }

    /// Appends one line (it ends with its newline).
    func append(_ line: ByteBuffer) {
        handle.withLock { $0?.write(Data(line.readableBytesView)) }
    }

    /// Closes the file.
    func close() {
        handle.withLock {
            try? $0?.close()
            $0 = nil
        }
    }
}
