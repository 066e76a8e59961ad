package import ChaosCore
package import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Starts the scenario's `pair:` (server first, waits for its readiness check, then the clients),
/// keeps their output in the run folder, notices unexpected exits, and stops them at the end
/// (SIGTERM, then SIGKILL after the grace time).
package final class PairSupervisor: Sendable {
    /// One started process.
    package struct Member: Sendable, Equatable {
        /// `server`, `client-1`, …
        package var name: String
        /// The command line as run.
        package var command: String
        /// Its process id.
        package var pid: Int32
    }

    /// An exit, expected or not.
    package struct Exit: Sendable, Equatable {
        /// Which member.
        package var name: String
        /// The exit status (or 128 + signal).
        package var status: Int32
        /// Nanoseconds on the run clock.
        package var at: Int64
        /// Whether it happened before the run asked it to stop (a `restart` fault's stop is asked for too).
        package var unexpected: Bool
        /// The process that exited (a restarted server's processes share its name).
        package var pid: Int32 = 0
    }

    private struct Running: Sendable {
        var member: Member
        var process: ChildProcess
    }

    private let pair: PairSpec
    private let values: [String: String]
    private let directory: URL
    private let selfPath: String
    private let now: @Sendable () -> Int64
    /// The connections the proxies have accepted so far (a client's `ready: connected` waits for one per client).
    private let connections: @Sendable () -> Int64
    /// The ports the TCP proxies listen on: a client is connected when one of its processes holds a connection to one.
    private let proxyPorts: @Sendable () -> Set<Int>
    private let state = Mutex<(running: [Running], exits: [Exit], stopping: Bool, reaper: Task<Void, Never>?, expected: Set<Int32>)>(
        ([], [], false, nil, [])
    )
    /// Stops the pair if chaos dies without stopping it (started with the first member), and the process groups of
    /// the members that still have a process in them (a member leads its own; an empty one is forgotten as soon as
    /// the reaper sees it empty, so that its id, free again, is never signalled).
    private let guardian = Mutex<(watcher: PairGuard?, groups: Set<pid_t>)>((nil, []))
    private static func check(_ interrupted: @Sendable () -> Bool) throws {
        if interrupted() { throw ChaosError(.pair, "stopped by a signal while the pair was starting") }
    }

    /// A supervisor for `pair`; `values` fill the placeholders (`listen.port`, …), output goes
    /// under `directory`, and `chaos` at the start of a command means this executable.
    package init(
        pair: PairSpec,
        values: [String: String],
        directory: URL,
        selfPath: String,
        now: @escaping @Sendable () -> Int64,
        connections: @escaping @Sendable () -> Int64 = { 0 },
        proxyPorts: @escaping @Sendable () -> Set<Int> = { [] }
    ) {
        self.pair = pair
        self.values = values
        self.directory = directory
        self.selfPath = selfPath
        self.now = now
        self.connections = connections
        self.proxyPorts = proxyPorts
    }

    /// How long, once the proxies have as many connections as there are clients, the wait goes on for a client the
    /// kernel does not show holding one (a client whose connections are too short to be seen) before it is taken as
    /// connected.
    static let unseenClientGrace = 10.0

    /// Every exit so far.
    package var exits: [Exit] { state.withLock { $0.exits } }
    /// Every member started.
    package var members: [Member] { state.withLock { $0.running.map(\.member) } }

    /// The command with placeholders filled and a leading `chaos` made absolute.
    package func command(_ template: String, index: Int) -> String {
        var text = template
        var all = values
        all["index"] = "\(index)"
        // A value the shell would read as more than one word (or as syntax) is filled in quoted.
        for (key, value) in all { text = text.replacingOccurrences(of: "{\(key)}", with: Self.shellWord(value)) }
        if text == "chaos" || text.hasPrefix("chaos ") { text = shellQuote(selfPath) + text.dropFirst("chaos".count) }
        return text
    }

    /// How long a server may take to pass its `ready:` check: a JVM warming up, or an interpreter importing its web
    /// stack on a loaded CI machine (a Python server of the tests took more than 20 s in a fresh-clone `make test`).
    static let serverReadyTimeout = 60.0
    /// How long the clients of `ready: connected` may take to hold their connections through the proxies.
    static let connectedTimeout = 20.0

    /// Starts the server and waits for it (up to ``serverReadyTimeout``), then the clients (`ready: connected`: up to
    /// ``connectedTimeout``). A command that is missing, or exits at once, or a server that never gets ready, is a
    /// `pair` error naming its output file.
    /// `interrupted` is polled while waiting: when it turns true (a signal), start-up stops with an error.
    package func start(interrupted: @escaping @Sendable () -> Bool = { false }) async throws {
        if let server = pair.server {
            let member = try launch(name: "server", command: command(server.run, index: 1))
            if let ready = server.ready {
                try await waitReady(command(ready, index: 1), member: member, timeout: Self.serverReadyTimeout, interrupted: interrupted)
            } else {
                try await checkAlive([member], within: Self.startupWindow, interrupted: interrupted)
            }
        }
        if let client = pair.client {
            let opened = connections()
            var started: [Member] = []
            for index in 1...client.count {
                started.append(try launch(name: "client-\(index)", command: command(client.run, index: index)))
            }
            try await checkAlive(started, within: Self.startupWindow, interrupted: interrupted)
            if client.ready == ProcessSpec.connectedCheck {
                try await waitConnected(started, from: opened, timeout: Self.connectedTimeout, interrupted: interrupted)
            }
        }
    }

    /// Waits until the proxies have accepted one connection per client since `opened` (their count before the
    /// clients started) and every client process (or one below it) holds a TCP connection to a proxy, as the kernel
    /// shows it (``ClientSockets``; UDP proxies and systems without `/proc` go by the count alone); a client that exits
    /// first is a `pair` error, and so is a wait past `timeout`.
    private func waitConnected(_ clients: [Member], from opened: Int64, timeout: Double, interrupted: @Sendable () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        let ports = proxyPorts()
        var seen: Set<Int32> = []
        var countedSince: Date?
        while true {
            if connections() - opened >= Int64(clients.count) {
                let since = countedSince ?? Date()
                countedSince = since
                guard !ports.isEmpty, let inodes = ClientSockets.establishedInodes(remotePorts: ports) else { return }
                let unseen = clients.map(\.pid).filter { !seen.contains($0) }
                for (pid, tree) in ClientSockets.trees(of: unseen) where ClientSockets.holdsOne(of: inodes, tree) {
                    seen.insert(pid)
                }
                if seen.count == clients.count || Date().timeIntervalSince(since) > Self.unseenClientGrace { return }
            }
            try Self.check(interrupted)
            for member in clients {
                if let status = exitStatus(of: member) { throw failure(member, "exited with status \(status) before it connected") }
            }
            guard Date() < deadline else {
                throw ChaosError(
                    .pair,
                    "pair clients were not connected (ready: connected) after \(Int(timeout)) s: "
                        + "\(connections() - opened) of \(clients.count) connections through the proxies, "
                        + "\(seen.count) of \(clients.count) clients seen holding one; "
                        + "are the clients pointed at a proxy's listen address ({listen.port})?"
                )
            }
            try? await Task.sleep(nanoseconds: countedSince == nil ? 10_000_000 : 50_000_000)
        }
    }

    /// Stops every member: SIGTERM to clients, then the server; SIGKILL after `grace`. Then what a member left in its
    /// process group (a child it started and did not stop) gets SIGKILL, and the guard is told the pair is stopped.
    package func stop() async {
        let running = state.withLock { state -> [Running] in
            state.stopping = true
            return state.running
        }
        let clients = running.filter { $0.member.name != "server" }
        let servers = running.filter { $0.member.name == "server" }
        for group in [clients, servers] where !group.isEmpty {
            for item in group where isRunning(item.member) { item.process.send(SIGTERM) }
            let grace =
                (group.first?.member.name == "server" ? pair.server?.stopGrace : pair.client?.stopGrace)
                ?? .seconds(Int64(5))
            await waitForExit(group, until: Date().addingTimeInterval(grace.seconds))
            for item in group where isRunning(item.member) { item.process.send(SIGKILL) }
            await waitForExit(group, until: .distantFuture)
        }
        let (watcher, groups) = guardian.withLock { ($0.watcher, $0.groups) }
        for group in groups { kill(-group, SIGKILL) }
        watcher?.release()
        state.withLock { $0.reaper }?.cancel()
    }

    private func isRunning(_ member: Member) -> Bool { exitStatus(of: member) == nil }

    /// The server now running, if any (a restarted server is the latest started).
    private var runningServer: Running? {
        let latest = state.withLock { state in state.running.last { running in running.member.name == "server" } }
        return latest.flatMap { isRunning($0.member) ? $0 : nil }
    }

    /// A `restart` fault's first half: stops the server with `signal` (SIGTERM, then SIGKILL after its
    /// `stop_grace`; or SIGKILL at once), its exit expected, and waits until it has exited. Returns whether one was
    /// running.
    package func stopServer(_ signal: RestartSignal) async -> Bool {
        guard let server = runningServer else { return false }
        state.withLock { _ = $0.expected.insert(server.member.pid) }
        switch signal {
        case .term:
            server.process.send(SIGTERM)
            await waitForExit([server], until: Date().addingTimeInterval((pair.server?.stopGrace ?? .seconds(Int64(5))).seconds))
            if isRunning(server.member) { server.process.send(SIGKILL) }
        case .kill:
            server.process.send(SIGKILL)
        }
        await waitForExit([server], until: .distantFuture)
        return true
    }

    /// A `restart` fault's second half: starts the server again with its own command (its output appended to the
    /// same files) and waits for its readiness check in the background; a server that cannot start again shows as an
    /// unexpected exit, as any pair process that dies during the run.
    package func startServer() async {
        guard let server = pair.server, !state.withLock({ $0.stopping }), runningServer == nil else { return }
        guard let member = try? launch(name: "server", command: command(server.run, index: 1), append: true) else { return }
        if let ready = server.ready {
            Task.detached { [self] in
                try? await waitReady(command(ready, index: 1), member: member, timeout: Self.serverReadyTimeout, interrupted: { false })
            }
        }
    }

    private func waitForExit(_ group: [Running], until deadline: Date) async {
        while group.contains(where: { isRunning($0.member) }), Date() < deadline {
            reap()
            // Sleeps even when the calling task is cancelled: a stop must not spin.
            await Task.detached { try? await Task.sleep(nanoseconds: 20_000_000) }.value
        }
    }

    /// Records the exit of every member that ended since the last look, and forgets the process groups left empty.
    private func reap() {
        let reaped = ChildProcess.reapExited()
        forgetEmptyGroups()
        guard !reaped.isEmpty else { return }
        let at = now()
        state.withLock { state in
            for (pid, status) in reaped {
                guard let member = state.running.first(where: { $0.member.pid == pid })?.member else { continue }
                let unexpected = !state.stopping && !state.expected.contains(pid)
                state.exits.append(Exit(name: member.name, status: status, at: at, unexpected: unexpected, pid: pid))
            }
        }
    }

    /// A group whose leader exited may still hold what it started; once none is left, the guard forgets it.
    private func forgetEmptyGroups() {
        guardian.withLock { guardian in
            for group in guardian.groups where kill(-group, 0) == -1 && errno == ESRCH {
                guardian.groups.remove(group)
                guardian.watcher?.forget(group: group)
            }
        }
    }

    private func launch(name: String, command: String, append: Bool = false) throws -> Member {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let out = directory.appendingPathComponent("\(name).out")
        let err = directory.appendingPathComponent("\(name).err")
        if !append {
            _ = FileManager.default.createFile(atPath: out.path, contents: nil)
            _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        }
        let watcher = try guardian.withLock { guardian in
            let watcher = try guardian.watcher ?? PairGuard()
            guardian.watcher = watcher
            return watcher
        }
        let process = try ChildProcess.spawnShell(command, standardOutput: out.path, standardError: err.path)
        guardian.withLock { _ = $0.groups.insert(process.pid) }
        watcher.watch(group: process.pid)
        let member = Member(name: name, command: command, pid: process.pid)
        let startsReaper = state.withLock { state -> Bool in
            state.running.append(Running(member: member, process: process))
            return state.reaper == nil
        }
        if startsReaper {
            // Notices exits while the run goes on (an unexpected one is a verdict error), every 20 ms.
            let reaper = Task.detached { [weak self] in
                while !Task.isCancelled {
                    self?.reap()
                    try? await Task.sleep(nanoseconds: 20_000_000)
                }
            }
            state.withLock { $0.reaper = reaper }
        }
        return member
    }

    private func exitStatus(of member: Member) -> Int32? {
        reap()
        return state.withLock { $0.exits.first { $0.pid == member.pid }?.status }
    }

    private func failure(_ member: Member, _ what: String) -> ChaosError {
        let err = directory.appendingPathComponent("\(member.name).err").path
        // Decoded leniently: a member that died mid-character still shows what it said.
        let tail =
            FileManager.default.contents(atPath: err).map { String(decoding: $0, as: UTF8.self) }?
            .split(separator: "\n").suffix(3).joined(separator: " | ") ?? ""
        let status = exitStatus(of: member)
        let missing = status == 127 ? " (command not found)" : ""
        return ChaosError(
            .pair,
            "pair \(member.name) \(what)\(missing): '\(member.command)'; "
                + "its stderr is in \(err)" + (tail.isEmpty ? "" : ": \(tail)")
        )
    }

    /// How long a started member must stay alive not to have "exited at once": long enough for a cold start of a
    /// large binary on a loaded machine to reach its argument check (0.3 s was not, on a fresh clone under `make test`).
    static let startupWindow = 1.0

    /// Waits `seconds` (one window for all of `members`, started together); the first that exits is a `pair` error.
    private func checkAlive(_ members: [Member], within seconds: Double, interrupted: @Sendable () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        repeat {
            try Self.check(interrupted)
            for member in members {
                if let status = exitStatus(of: member) { throw failure(member, "exited at once with status \(status)") }
            }
            try? await Task.sleep(nanoseconds: 20_000_000)
        } while Date() < deadline
        for member in members {
            if let status = exitStatus(of: member) { throw failure(member, "exited at once with status \(status)") }
        }
    }

    private func waitReady(_ check: String, member: Member, timeout: Double, interrupted: @Sendable () -> Bool) async throws {
        let target = check.split(separator: " ", maxSplits: 1).last.map(String.init) ?? ""
        guard let address = HostPort(parsing: target) else {
            throw ChaosError.badInput("pair.server.ready must be 'tcp HOST:PORT', found '\(check)'")
        }
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            try Self.check(interrupted)
            if let status = exitStatus(of: member) { throw failure(member, "exited with status \(status) before it was ready") }
            if TCPProbe.accepts(address) { return }
            try? await Task.sleep(nanoseconds: 50_000_000)
        }
        throw failure(member, "was not ready (\(check)) after \(Int(timeout)) s")
    }

    /// `text` as one shell word: as is when it holds only characters the shell reads literally, else quoted.
    static func shellWord(_ text: String) -> String {
        let plain =
            !text.isEmpty
            && text.unicodeScalars.allSatisfy {
                ($0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-/:,@%+=".unicodeScalars.contains($0)))
            }
        return plain ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    private func shellQuote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}

/// Whether something accepts TCP connections at an address (a readiness check).
enum TCPProbe {
    static func accepts(_ address: HostPort) -> Bool {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(address.host, "\(address.port)", &hints, &result) == 0, let info = result else { return false }
        defer { freeaddrinfo(result) }
        let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0
    }
}
