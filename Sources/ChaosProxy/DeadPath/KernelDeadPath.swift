import Foundation
import Glibc
import Synchronization

/// A dead path as the pair's own TCP sees it: while a partition, a stall, a handoff's blackout, an offline link or a
/// NAT that forgot the connection holds a connection, the kernel drops its legs' segments (nftables rules in a table
/// of chaos's own, scoped to the legs' 4-tuples), so no TCP acknowledges what was sent into the dead path: windows
/// stall, retransmissions back off, `TCP_USER_TIMEOUT` fires. When the fault ends the rules go and the same TCP
/// connection carries on. The default where the process has CAP_NET_ADMIN (root has it) and `nft`; without either, or
/// with `CHAOS_DEAD_PATH=proxy`, the hold stays in the proxy, named as such (``Availability/proxy(reason:)``).
///
/// One per process (``shared``): its table is `inet chaos_<pid>`, removed at exit; a table left by a chaos that was
/// killed is removed when the next one starts. Changes are applied in order on a queue of their own, coalesced: a
/// burst of connections entering a partition costs one `nft` run.
package final class KernelDeadPath: Sendable {
    /// Where a dead path's bytes stop.
    package enum Availability: Sendable, Equatable {
        /// In the kernel: segments are dropped, nobody's TCP acknowledges them.
        case kernel
        /// In the proxy, because of `reason`: the proxy's kernel acknowledged what the proxy held.
        case proxy(reason: String)
    }

    /// The process's dead path (probed on first use).
    package static let shared = KernelDeadPath()

    /// Whether the kernel path works here.
    package let availability: Availability
    /// Where a lossy flow's segments get their verdicts, on the kernel path (``KernelLoss``); nil: loss is emulated in
    /// the proxy (``lossUnavailable`` says why, on the kernel path).
    package let loss: KernelLoss?
    /// Why the kernel path has no loss queue (nil: it has one, or there is no kernel path).
    package let lossUnavailable: String?

    /// Whether the process made its table (``shared`` was probed and the kernel path works): asked without probing.
    package static var isInUse: Bool { tableToRemoveAtExit.withLock { $0 != nil } }
    /// The process's table.
    package let table: String
    private let nft: String?
    /// `iptables-restore` and `ip6tables-restore`, for the loss queue's rules (``LossQueueScript``).
    private let iptables: (v4: String?, v6: String?)
    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "chaos.kernel-dead-path")

    private struct State {
        /// What each flow should have dropped now, and what the kernel has.
        var wanted: [KernelFlow: KernelDrop] = [:]
        var applied: [KernelFlow: KernelDrop] = [:]
        /// Changes asked for, and applied (or given up on).
        var generation = 0
        var appliedGeneration = 0
        var scheduled = false
        var waiters: [(generation: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var failures: [String] = []
    }

    /// What a run says at its end about the kernel's loss queue, once it drew for a segment (nil: it did not, or the
    /// process has no kernel path): asked without probing.
    package static var lossLine: String? {
        guard isInUse, let total = shared.loss?.total, total.segments > 0 else { return nil }
        return "loss in the kernel: \(total.dropped) of \(total.segments) segments dropped"
    }

    /// What a run says at start-up and in its report about where a dead path's bytes stop.
    package var summary: String {
        switch availability {
        case .kernel:
            let failures = self.failures
            let refused = failures.first.map { "; the kernel refused \(failures.count) change(s), the first: \($0)" } ?? ""
            let lossNote: String
            if let loss {
                let total = loss.total
                lossNote = "; loss dropped in the kernel (queue \(loss.queue)): \(total.dropped) of \(total.segments) segments drawn"
            } else {
                lossNote = "; loss emulated in the proxy (\(lossUnavailable ?? "no queue"))"
            }
            return "dropped in the kernel (nftables table inet \(table)): the sender's TCP sees no acknowledgement\(lossNote)\(refused)"
        case .proxy(let reason): return "held in the proxy: the sender's TCP saw acknowledgements (\(reason))"
        }
    }

    private init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let pid = getpid()
        table = NftScript.tableName(pid: pid)
        let probe = Self.probe(environment: environment)
        // A killed chaos's rules go whichever path this run takes, wherever this process may remove them.
        if let nft = probe.privileged {
            Self.removeStaleTables(nft: nft)
            Self.removeLossRules(probe.iptables) { pid in !FileManager.default.fileExists(atPath: "/proc/\(pid)") }
        }
        nft = probe.nft
        guard let nft = probe.nft else {
            availability = .proxy(reason: probe.reason)
            (loss, lossUnavailable, iptables) = (nil, nil, (nil, nil))
            return
        }
        if probe.iptables.v4 == nil || probe.iptables.v6 == nil {
            (loss, lossUnavailable) = (nil, "iptables is not installed (Debian: apt-get install iptables): the loss queue's rules need it")
        } else {
            switch KernelLoss.open(pid: pid) {
            case .success(let opened): (loss, lossUnavailable) = (opened, nil)
            case .failure(let failure): (loss, lossUnavailable) = (nil, failure.reason)
            }
        }
        iptables = probe.iptables
        if let error = Self.run(nft, script: NftScript.create(table: table)) {
            availability = .proxy(reason: "nft could not add table inet \(table): \(error)")
            return
        }
        availability = .kernel
        tableToRemoveAtExit.withLock { $0 = (nft, table) }
        lossRulesToRemoveAtExit.withLock { $0 = loss == nil ? nil : probe.iptables }
        atexit {
            guard let (nft, table) = tableToRemoveAtExit.withLock({ $0 }) else { return }
            _ = KernelDeadPath.run(nft, script: NftScript.delete(table: table))
            if let iptables = lossRulesToRemoveAtExit.withLock({ $0 }) {
                KernelDeadPath.removeLossRules(iptables) { $0 == getpid() }
            }
        }
    }

    /// Sets what the kernel drops of each flow (nil: nothing). Applied soon, in order; ``installed()`` waits for it.
    package func want(_ drops: [(flow: KernelFlow, drop: KernelDrop?)]) {
        guard availability == .kernel, !drops.isEmpty else { return }
        let schedule = state.withLock { state -> Bool in
            for (flow, drop) in drops { state.wanted[flow] = drop }
            state.generation += 1
            defer { state.scheduled = true }
            return !state.scheduled
        }
        if schedule { queue.async { self.apply() } }
    }

    /// Returns once every change asked for before the call is in the kernel (or failed, and was reported).
    package func installed() async {
        guard availability == .kernel else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                guard state.appliedGeneration < state.generation else { return true }
                state.waiters.append((state.generation, continuation))
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// How many times a change is tried before it counts as refused.
    static let attempts = 3

    /// What `nft` refused, in order (at most the first ten; the run's summary names them).
    package var failures: [String] { state.withLock { $0.failures } }

    private func apply() {
        let (changes, generation) = state.withLock { state in
            state.scheduled = false
            let flows = Set(state.wanted.keys).union(state.applied.keys).sorted()
            let changes = flows.compactMap { flow -> (flow: KernelFlow, from: KernelDrop?, to: KernelDrop?)? in
                let (from, to) = (state.applied[flow], state.wanted[flow])
                return from == to ? nil : (flow, from, to)
            }
            return (changes, state.generation)
        }
        var error: String?
        var lossError: String?
        if !changes.isEmpty, let nft {
            error = Self.tried("nft", "the dead path's rules") { Self.run(nft, script: NftScript.change(table: table, changes)) }
            // The loss queue's rules apart: one refused leaves that flow's loss undrawn (said in the summary), never the
            // dead path's drops in a state the next change misreads; a rule left behind queues packets of a flow no
            // longer drawn for, which pass.
            if error == nil, let loss {
                let queued = LossQueueScript.change(changes, queue: loss.queue, comment: table)
                for (program, script) in [(iptables.v4, queued.ipv4), (iptables.v6, queued.ipv6)] {
                    guard let program, let script, lossError == nil else { continue }
                    lossError = Self.tried("iptables", "the loss queue's rules") {
                        Self.run(program, script: script, arguments: ["--noflush", "--wait"])
                    }
                }
            }
        }
        let ready = state.withLock { state in
            if let lossError, state.failures.count < 10 { state.failures.append(lossError) }
            if let error {
                if state.failures.count < 10 { state.failures.append(error) }
            } else {
                for change in changes { state.applied[change.flow] = change.to }
            }
            state.appliedGeneration = max(state.appliedGeneration, generation)
            let ready = state.waiters.filter { $0.generation <= state.appliedGeneration }.map(\.continuation)
            state.waiters.removeAll { $0.generation <= state.appliedGeneration }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Runs `change` (which returns its error) up to ``attempts`` times, a tenth of a second apart: another process
    /// changing the ruleset at the same moment can make a batch fail once. Returns the last error, nil once it succeeded.
    private static func tried(_ program: String, _ what: String, _ change: () -> String?) -> String? {
        var error: String?
        for attempt in 1...attempts {
            error = change()
            guard let failed = error else { return nil }
            FileHandle.standardError.write(Data("chaos: \(program) refused \(what) (try \(attempt) of \(attempts)): \(failed)\n".utf8))
            if attempt < attempts { usleep(100_000) }
        }
        return error
    }

    // MARK: the system

    /// `nft` when the kernel path is not declined (`CHAOS_DEAD_PATH=proxy`) and this process may use it (CAP_NET_ADMIN,
    /// which root has), or why the proxy holds instead; and `nft` whenever the process may use it (`privileged`: to
    /// remove a killed chaos's table).
    static func probe(
        environment: [String: String]
    ) -> (nft: String?, privileged: String?, reason: String, iptables: (v4: String?, v6: String?)) {
        func find(_ name: String) -> String? {
            ["/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"].map { $0 + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
        }
        let installed = find("nft")
        let mayAdminister = hasNetAdmin()
        let privileged = mayAdminister ? installed : nil
        let iptables = mayAdminister ? (find("iptables-restore"), find("ip6tables-restore")) : (nil, nil)
        switch environment["CHAOS_DEAD_PATH"] {
        case "kernel", nil, "": break
        case "proxy": return (nil, privileged, "CHAOS_DEAD_PATH=proxy", iptables)
        case let other?: return (nil, privileged, "CHAOS_DEAD_PATH=\(other) is neither kernel nor proxy", iptables)
        }
        guard mayAdminister else {
            return (nil, nil, "no CAP_NET_ADMIN (\(geteuid() == 0 ? "root without it" : "not root")): the kernel path needs it", (nil, nil))
        }
        guard let installed else { return (nil, nil, "nft is not installed (Debian: apt-get install nftables)", (nil, nil)) }
        return (installed, installed, "", iptables)
    }

    /// Whether the process's effective capabilities hold CAP_NET_ADMIN (bit 12 of CapEff in /proc/self/status).
    static func hasNetAdmin() -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let mask = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return mask & (1 << 12) != 0
    }

    /// Removes the tables of chaos processes that are gone (killed before they could).
    static func removeStaleTables(nft: String) {
        guard let listing = try? capture(nft, ["list", "tables"]) else { return }
        // A process of that id still runs: its table stays.
        let stale = NftScript.staleTables(in: listing) { pid in FileManager.default.fileExists(atPath: "/proc/\(pid)") }
        for table in stale { _ = run(nft, script: NftScript.delete(table: table)) }
    }

    /// Removes the loss queue's rules (``LossQueueScript``) whose process `remove` names: a killed chaos's, or at exit
    /// this one's.
    static func removeLossRules(_ iptables: (v4: String?, v6: String?), remove: (Int32) -> Bool) {
        for restore in [iptables.v4, iptables.v6].compactMap({ $0 }) {
            let save = restore.replacingOccurrences(of: "-restore", with: "-save")
            guard FileManager.default.isExecutableFile(atPath: save), let saved = try? capture(save, ["-t", "raw"]),
                let script = LossQueueScript.removal(in: saved, remove: remove)
            else { continue }
            _ = run(restore, script: script, arguments: ["--noflush", "--wait"])
        }
    }

    /// Runs `program` (`nft -f -` by default) with `script` on its input; returns its error (stderr, or how it ended),
    /// nil when it succeeded.
    static func run(_ program: String, script: String, arguments: [String] = ["-f", "-"]) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let input = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        do {
            try process.run()
        } catch {
            return "\(program) did not start: \(error)"
        }
        input.fileHandleForWriting.write(Data(script.utf8))
        try? input.fileHandleForWriting.close()
        let stderr = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus != 0 else { return nil }
        let message = String(decoding: stderr, as: UTF8.self).split(separator: "\n").prefix(3).joined(separator: " / ")
        return "\(URL(fileURLWithPath: program).lastPathComponent) exited \(process.terminationStatus): \(message)"
    }

    private static func capture(_ nft: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: nft)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}

/// The nft binary and the table `atexit` removes (set once the table is made).
private let tableToRemoveAtExit = Mutex<(String, String)?>(nil)
/// The `iptables-restore` binaries whose loss queue rules of this process `atexit` removes (set once the queue is open).
private let lossRulesToRemoveAtExit = Mutex<(v4: String?, v6: String?)?>(nil)
