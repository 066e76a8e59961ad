import Foundation
import Testing

/// A `tcpdump -i lo` of some ports, taken while a test's run goes on.
struct LoopbackTcpdump {
    let process: Process
    /// The pcap file it writes.
    let file: String

    /// Starts tcpdump on `ports` and waits until it says it listens (at most 15 s): on a loaded machine it can take
    /// more than a second to attach, and a capture that misses a connection's first packets (a TLS handshake) cannot
    /// be audited. `immediate` hands it each packet as it comes (`--immediate-mode`) rather than a buffer's worth at a
    /// time, so that the last packets of a run are written before ``stop()`` sees the file stop growing. `transport`:
    /// `tcp` or `udp` (a `udp://` proxy's legs).
    static func start(ports: [Int], file: String, immediate: Bool = false, transport: String = "tcp") async throws -> LoopbackTcpdump {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            ["tcpdump", "-i", "lo"] + (immediate ? ["--immediate-mode"] : []) + [
                "-U", "-B", "32768", "-s", "0", "-w", file,
                ports.map { "\(transport) port \($0)" }.joined(separator: " or "),
            ]
        let messages = file + ".tcpdump.txt"
        try #require(FileManager.default.createFile(atPath: messages, contents: nil), "cannot create \(messages)")
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: messages))
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let dump = LoopbackTcpdump(process: process, file: file)
        for _ in 0..<300 {
            if dump.messages.contains("listening on") { return dump }
            guard process.isRunning else { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        dump.kill()
        Issue.record("tcpdump did not start listening within 15 s: \(dump.messages)")
        return dump
    }

    /// What tcpdump wrote to its standard error (that it listens).
    var messages: String { (try? String(contentsOfFile: file + ".tcpdump.txt", encoding: .utf8)) ?? "" }

    /// Stops it once its file has stopped growing: tcpdump writes each packet as it handles it (-U), but on
    /// a loaded machine it lags behind the kernel. (SIGKILL: a child of the test process inherits its blocked
    /// SIGINT and SIGTERM.)
    func stop() async throws {
        var lastSize = -1
        for _ in 0..<40 {
            try await Task.sleep(nanoseconds: 500_000_000)
            let size = ((try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? NSNumber)?.intValue ?? 0
            if size == lastSize { break }
            lastSize = size
        }
        kill()
    }

    /// Kills it at once (on a test's way out).
    func kill() {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
