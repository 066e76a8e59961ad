import Foundation

/// A `tcpdump -i lo` of some ports, taken while a test's run goes on.
struct LoopbackTcpdump {
    let process: Process
    /// The pcap file it writes.
    let file: String

    /// Starts tcpdump on `ports` and gives it a second to attach. `immediate` hands it each packet as it comes
    /// (`--immediate-mode`) rather than a buffer's worth at a time, so that the last packets of a run are written
    /// before ``stop()`` sees the file stop growing.
    static func start(ports: [Int], file: String, immediate: Bool = false) async throws -> LoopbackTcpdump {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            ["tcpdump", "-i", "lo"] + (immediate ? ["--immediate-mode"] : []) + [
                "-U", "-B", "32768", "-s", "0", "-w", file,
                ports.map { "tcp port \($0)" }.joined(separator: " or "),
            ]
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        try await Task.sleep(nanoseconds: 1_000_000_000)
        return LoopbackTcpdump(process: process, file: file)
    }

    /// Stops it once its file has stopped growing: tcpdump writes each packet as it handles it (-U), but on
    /// a loaded machine it lags behind the kernel.
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
