import Foundation
import Synchronization

/// Runs the built `chaos` executable as a real child process, with a time limit.
struct ChaosCLI {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let executable = packageRoot.appendingPathComponent(".build/debug/chaos").path

    struct Result: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
        /// Whether a signal ended the process (then `status` is the signal's number, not an exit code: a SIGINT
        /// from outside would otherwise pass for exit 2).
        var signalled = false
        /// From launch to exit, measured on the thread that waited for it (not by a test task, which a busy
        /// cooperative pool may resume late).
        var seconds: Double = 0
        /// From the signal the caller asked for to exit (nil: it was never sent), measured the same way: how promptly
        /// the process stopped, whatever its start-up took on a loaded machine.
        var secondsAfterSignal: Double?
    }

    /// Runs `chaos arguments…` to completion on its own thread (never blocking the cooperative pool).
    /// `signalOnceExists`: the signal waits, past its `after`, for these files to exist (a run's first checkpoint);
    /// `signalOnceLogged`: for each of these logs of the demo pair to hold a processed message (a line with a `seq`).
    static func run(
        _ arguments: [String],
        timeout: Double = 60,
        environment: [String: String]? = nil,
        signal: (after: Double, number: Int32)? = nil,
        signalOnceExists: [String] = [],
        signalOnceLogged: [String] = [],
        program: String? = nil,
        directory: URL? = nil
    ) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                do {
                    continuation.resume(
                        returning: try runBlocking(
                            arguments,
                            timeout: timeout,
                            environment: environment,
                            signal: signal,
                            signalOnceExists: signalOnceExists,
                            signalOnceLogged: signalOnceLogged,
                            program: program,
                            directory: directory
                        )
                    )
                } catch { continuation.resume(throwing: error) }
            }
        }
    }

    /// Runs `chaos arguments…` to completion (killed after `timeout` seconds), blocking this thread, in `directory`
    /// (default: the package root).
    static func runBlocking(
        _ arguments: [String],
        timeout: Double = 60,
        environment: [String: String]? = nil,
        signal: (after: Double, number: Int32)? = nil,
        signalOnceExists: [String] = [],
        signalOnceLogged: [String] = [],
        program: String? = nil,
        directory: URL? = nil
    ) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program ?? executable)
        process.arguments = arguments
        process.currentDirectoryURL = directory ?? packageRoot
        if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("chaos-out-\(UUID().uuidString)")
        let err = FileManager.default.temporaryDirectory.appendingPathComponent("chaos-err-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        defer {
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: err)
        }
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        try process.run()
        let started = Date()
        var signalled = false
        var signalledAt: Date?
        while process.isRunning {
            let elapsed = Date().timeIntervalSince(started)
            if let signal, !signalled, elapsed >= signal.after,
                signalOnceExists.allSatisfy({ FileManager.default.fileExists(atPath: $0) }),
                signalOnceLogged.allSatisfy(holdsAProcessedMessage)
            {
                kill(process.processIdentifier, signal.number)
                signalled = true
                signalledAt = Date()
            }
            if elapsed > timeout {
                kill(process.processIdentifier, SIGKILL)
                break
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        process.waitUntilExit()
        // Decoded leniently: one stray byte must not turn a whole output into "".
        let text = { (url: URL) in (try? Data(contentsOf: url)).map { String(decoding: $0, as: UTF8.self) } ?? "" }
        let killed = process.terminationReason == .uncaughtSignal
        return Result(
            status: killed ? 128 + process.terminationStatus : process.terminationStatus,
            stdout: text(out),
            stderr: text(err),
            signalled: killed,
            seconds: Date().timeIntervalSince(started),
            secondsAfterSignal: signalledAt.map { Date().timeIntervalSince($0) }
        )
    }

    /// Whether the demo pair's log at `path` holds a processed message (`{"t":…,"dir":…,"stream":…,"seq":7}`).
    private static func holdsAProcessedMessage(_ path: String) -> Bool {
        guard let data = FileManager.default.contents(atPath: path) else { return false }
        return String(decoding: data, as: UTF8.self).contains(#""seq":"#)
    }

    /// Ports handed out by ``freePort()`` in this process: never twice.
    private static let handedOut = Mutex<Set<Int>>([])

    /// The ports ``freePort()`` draws from: `CHAOS_TEST_PORTS` (`LOW-HIGH`: make test gives each lane a range of its
    /// own, so that two test processes never hand out the same port), else 20000-31999.
    static let portRange: ClosedRange<Int> = {
        let bounds = (ProcessInfo.processInfo.environment["CHAOS_TEST_PORTS"] ?? "").split(separator: "-").compactMap { Int($0) }
        guard bounds.count == 2, 1024 <= bounds[0], bounds[0] < bounds[1], bounds[1] < 32_768 else { return 20_000...31_999 }
        return bounds[0]...bounds[1]
    }()

    /// A TCP port that is free right now on 127.0.0.1, for a process the test starts to bind later. Drawn below the
    /// kernel's ephemeral range (32768-60999 here): a port the kernel chose and released could be taken, before the
    /// process binds it, as the source port of any connection on the machine (a run of the suite met that).
    static func freePort() -> Int {
        for _ in 0..<500 {
            let port = Int.random(in: portRange)
            guard handedOut.withLock({ $0.insert(port).inserted }) else { continue }
            if canBind(port) { return port }
        }
        let (fd, port) = boundPort()
        close(fd)
        return port
    }

    /// Whether 127.0.0.1:`port` can be bound now (nothing listens there, nothing lingers in TIME_WAIT).
    private static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    /// A socket bound to a free port on 127.0.0.1 and not listening: while it stays open, nothing else can take
    /// the port and every connection to it is refused. Returns the descriptor (close it after) and the port.
    static func boundPort() -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Writes a scenario to a temporary file and returns its path.
    static func scenarioFile(_ text: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("scenario-\(UUID().uuidString).yaml")
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    /// Runs `command` with /bin/sh (for a limit set by `ulimit`) on a thread of its own; returns its exit status.
    static func shell(_ command: String, timeout: Double) async throws -> Int32 {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = ["-c", command]
                do { try process.run() } catch {
                    continuation.resume(throwing: error)
                    return
                }
                let deadline = Date().addingTimeInterval(timeout)
                while process.isRunning, Date() < deadline { usleep(10_000) }
                if process.isRunning { process.terminate() }
                process.waitUntilExit()
                continuation.resume(returning: process.terminationStatus)
            }
        }
    }
}
