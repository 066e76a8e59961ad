import Foundation
import Testing

/// One `chaos run` (or `chaos replay`) of a test: its own free ports, its own run folder, its output.
struct RunFolderUnderTest {
    let folder: URL
    let result: ChaosCLI.Result
    let listenPort: Int
    let upstreamPort: Int

    /// `chaos run ARGUMENTS --out FOLDER --set proxies.stream.listen=… --set proxies.stream.upstream=…`.
    /// `signalOnceCheckpointed`: the signal waits for the run's first report.json checkpoint (a loaded machine may
    /// start the pair later than the signal's time); `signalOnce`: for these files of the run folder to exist;
    /// `signalOnceLogged`: for these logs of the run folder to hold a processed message each. `launcher`: a program and
    /// its arguments that run chaos (`setpriv …`), chaos's path and arguments after them.
    static func run(
        _ arguments: [String],
        timeout: Double = 90,
        signal: (after: Double, number: Int32)? = nil,
        signalOnceCheckpointed: Bool = false,
        signalOnce files: [String] = [],
        signalOnceLogged logs: [String] = [],
        launcher: [String] = []
    ) async throws -> RunFolderUnderTest {
        let listen = ChaosCLI.freePort()
        var upstream = ChaosCLI.freePort()
        while upstream == listen { upstream = ChaosCLI.freePort() }
        let folder = newFolder()
        let chaosArguments =
            ["run"] + arguments + [
                "--out", folder.path, "--set", "proxies.stream.listen=127.0.0.1:\(listen)",
                "--set", "proxies.stream.upstream=127.0.0.1:\(upstream)",
            ]
        let result = try await ChaosCLI.run(
            launcher.isEmpty ? chaosArguments : launcher.dropFirst() + [ChaosCLI.executable] + chaosArguments,
            timeout: timeout,
            signal: signal,
            signalOnceExists: (signalOnceCheckpointed ? ["report.json"] : files).map { folder.appendingPathComponent($0).path },
            signalOnceLogged: logs.map { folder.appendingPathComponent($0).path },
            program: launcher.first
        )
        return RunFolderUnderTest(folder: folder, result: result, listenPort: listen, upstreamPort: upstream)
    }

    /// `chaos replay EARLIER --out FOLDER` (the earlier run's ports, which it no longer uses).
    static func run(replaying earlier: RunFolderUnderTest, timeout: Double = 90) async throws -> RunFolderUnderTest {
        let folder = newFolder()
        let result = try await ChaosCLI.run(["replay", earlier.folder.path, "--out", folder.path], timeout: timeout)
        return RunFolderUnderTest(
            folder: folder,
            result: result,
            listenPort: earlier.listenPort,
            upstreamPort: earlier.upstreamPort
        )
    }

    private static func newFolder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("chaos-e2e-\(UUID().uuidString)")
    }

    /// `report.json`, decoded as a tool reading the documented schema would.
    func report() throws -> ReportJSON {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(ReportJSON.self, from: file("report.json"))
    }

    /// A file of the run folder.
    func file(_ name: String) throws -> Data { try Data(contentsOf: folder.appendingPathComponent(name)) }

    /// The faults the run printed as applied (`00:00:01.234  latency add=… -> 3 connection(s)`), without the time
    /// (which is when it really happened) or the connection count.
    var appliedFaults: [String] {
        result.stdout.split(separator: "\n").compactMap { line -> String? in
            guard line.count > 14, line.dropFirst(12).hasPrefix("  "), line.prefix(12).allSatisfy({ $0.isNumber || $0 == ":" || $0 == "." }),
                let arrow = line.range(of: " -> ")
            else { return nil }
            return String(line[line.index(line.startIndex, offsetBy: 14)..<arrow.lowerBound])
        }
    }

    /// The process ids the run printed for its pair (`started client-1 (pid 123): …`).
    var pairPIDs: [Int32] {
        result.stdout.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("started "), let open = line.range(of: "(pid "),
                let close = line[open.upperBound...].firstIndex(of: ")")
            else { return nil }
            return Int32(line[open.upperBound..<close])
        }
    }

    /// Deletes the run folder (called once a test has checked it, so a failed test leaves it for a look).
    func remove() { try? FileManager.default.removeItem(at: folder) }
}

/// The fields of `report.json` (schema `chaos.report/1`, PRODUCT §5) that these tests read.
struct ReportJSON: Decodable {
    struct Counts: Decodable, Equatable, CustomStringConvertible {
        var sent: Int64 = 0, delivered: Int64 = 0, ok: Int64 = 0, lost: Int64 = 0, recovered: Int64 = 0
        var duplicated: Int64 = 0, redelivered: Int64 = 0, reordered: Int64 = 0, gaps: Int64 = 0, unacked: Int64 = 0
        var deliveryRatio: Double = 1

        var allNonNegative: Bool {
            [sent, delivered, ok, lost, recovered, duplicated, redelivered, reordered, gaps, unacked].allSatisfy { $0 >= 0 }
                && (0...1).contains(deliveryRatio)
        }

        mutating func add(_ other: Counts) {
            sent += other.sent
            delivered += other.delivered
            ok += other.ok
            lost += other.lost
            recovered += other.recovered
            duplicated += other.duplicated
            redelivered += other.redelivered
            reordered += other.reordered
            gaps += other.gaps
            unacked += other.unacked
        }

        var description: String { "ok \(ok) lost \(lost) sent \(sent) delivered \(delivered) redelivered \(redelivered)" }
    }

    struct Stream: Decodable {
        var stream: String
        var direction: String
        var highestSeq: Int64?
        var ok: Int64
        var lost: Int64
        /// Seqs neither ok nor lost (a reset left their delivery unknown).
        var unconfirmed: Int64
        var counts: Counts

        enum CodingKeys: String, CodingKey { case stream, direction, highestSeq, ok, lost, unconfirmed }

        /// Whether the audit's counts account for a consumer's log whose holes and distinct seqs are these: exactly,
        /// but for the unconfirmed seqs, which the consumer may or may not have read: each is in its log, or a hole in
        /// it, or past its end (taken by its TCP and never read: a client stopped before it read the first message it
        /// was sent, in a fresh-clone run under a CPU hog).
        func accountsFor(holes: Int, processed: Int) -> Bool {
            (lost...(lost + unconfirmed)).contains(Int64(holes)) && (ok...(ok + unconfirmed)).contains(Int64(processed))
                && ((lost + ok)...(lost + ok + unconfirmed)).contains(Int64(holes + processed))
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            stream = try container.decode(String.self, forKey: .stream)
            direction = try container.decode(String.self, forKey: .direction)
            highestSeq = try container.decodeIfPresent(Int64.self, forKey: .highestSeq)
            ok = try container.decode(Int64.self, forKey: .ok)
            lost = try container.decode(Int64.self, forKey: .lost)
            unconfirmed = try container.decodeIfPresent(Int64.self, forKey: .unconfirmed) ?? 0
            counts = try Counts(from: decoder)
        }

        var key: GroundTruthLog.Key { GroundTruthLog.Key(stream: stream, direction: direction) }
    }

    /// A fault as the timeline decided it (what must be equal across runs with one seed).
    struct Fault: Decodable, Equatable {
        var kind: String
        var atS: Double
        var forS: Double
        var detail: [String: String]
    }

    struct Anomaly: Decodable {
        var `class`: String
        var stream: String
        var direction: String
        var fromSeq: Int64?
        var toSeq: Int64?
    }

    struct Expectation: Decodable {
        var name: String
        var ok: Bool
    }

    struct Connections: Decodable {
        var opened: Int64
        var cutByFault: Int64
        var refused: Int64
    }

    var schema: String
    var scenario: String
    var seed: UInt64
    var complete: Bool
    var verdict: String
    var replay: String
    var elapsedS: Double
    var faults: [Fault]
    var totals: Counts
    var streams: [Stream]
    var anomalies: [Anomaly]
    var expectations: [Expectation]
    var connections: Connections
    var pairExits: [String: Int32]?
    var extra: [String: String]?

    /// Every seq the report lists as lost on `key` (from its `lost` anomalies).
    func lostSeqs(_ key: GroundTruthLog.Key) -> Set<Int> {
        var seqs = Set<Int>()
        for anomaly in anomalies where anomaly.class == "lost" && anomaly.stream == key.stream && anomaly.direction == key.direction {
            guard let from = anomaly.fromSeq, let to = anomaly.toSeq, from <= to else { continue }
            seqs.formUnion(Int(from)...Int(to))
        }
        return seqs
    }
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
enum TCPPort {
    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}

/// The live processes of this machine whose command line mentions a string (from /proc).
enum PairProcesses {
    static func alive(mentioning text: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let pid = Int32(entry), pid != getpid(), let command = commandLine(pid) else { return nil }
            return command.contains(text) ? pid : nil
        }
    }

    /// A live process's command line, its arguments joined by spaces (nil once it is gone).
    static func commandLine(_ pid: Int32) -> String? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
        return String(decoding: data.map { $0 == 0 ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
    }
}
