import ChaosCore
import Foundation

/// Helpers shared by the capture tests: temporary directories, child processes, event scripts.
enum TestSupport {
    /// A fresh temporary directory, removed by the caller with `removeDirectory`.
    static func makeTemporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "chaos-capture-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Removes a directory made by ``makeTemporaryDirectory()``.
    static func removeDirectory(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// The result of a child process.
    struct ProcessOutput {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs `executable` with `arguments`, waiting at most `timeout` seconds.
    static func run(_ executable: String, _ arguments: [String], timeout: TimeInterval = 30) throws -> ProcessOutput {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Read both pipes concurrently so a chatty child never blocks on a full pipe.
        let stdoutData = LockedData()
        let stderrData = LockedData()
        let group = DispatchGroup()
        for (pipe, sink) in [(out, stdoutData), (err, stderrData)] {
            group.enter()
            DispatchQueue.global().async {
                sink.set(pipe.fileHandleForReading.readDataToEndOfFile())
                group.leave()
            }
        }
        if group.wait(timeout: .now() + timeout) == .timedOut {
            process.terminate()
            group.wait()
        }
        process.waitUntilExit()
        return ProcessOutput(
            status: process.terminationStatus,
            stdout: String(decoding: stdoutData.get(), as: UTF8.self),
            stderr: String(decoding: stderrData.get(), as: UTF8.self)
        )
    }

    /// Whether two byte strings are equal (a plain Bool, so a failure does not print megabytes).
    static func same(_ one: [UInt8], _ other: [UInt8]) -> Bool { one == other }

    /// Deterministic pseudo-random bytes.
    static func bytes(count: Int, seed: UInt64) -> [UInt8] {
        var state = seed &+ 0x9E37_79B9_7F4A_7C15
        return (0..<count).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
    }
}

/// Data guarded by a lock, for collecting pipe output from another thread.
final class LockedData: @unchecked Sendable {
    // @unchecked Sendable: `data` is only read or written while `lock` is held.
    private let lock = NSLock()
    private var data = Data()
    func set(_ value: Data) { lock.withLock { data = value } }
    func get() -> Data { lock.withLock { data } }
}

/// What one proxied connection carried, per side, as seen by the audit.
struct ConnectionTraffic: Equatable {
    var readFromClient: [UInt8] = []
    var writtenToServer: [UInt8] = []
    var readFromServer: [UInt8] = []
    var writtenToClient: [UInt8] = []
    var closes: [String] = []

    /// Folds the events of one connection.
    static func collect(_ events: [TrafficEvent]) -> [ConnectionID: ConnectionTraffic] {
        var result: [ConnectionID: ConnectionTraffic] = [:]
        for event in events {
            var traffic = result[event.connection] ?? ConnectionTraffic()
            switch event.kind {
            case .read(.client, let bytes): traffic.readFromClient += bytes
            case .read(.server, let bytes): traffic.readFromServer += bytes
            case .written(.server, let bytes): traffic.writtenToServer += bytes
            case .written(.client, let bytes): traffic.writtenToClient += bytes
            case .closed(let side, let how): traffic.closes.append("\(side):\(how.rawValue)")
            default: break
            }
            result[event.connection] = traffic
        }
        return result
    }
}
