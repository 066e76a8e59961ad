import ChaosCore

#if canImport(Glibc)
import Glibc
#endif

/// A pair process, started with `posix_spawn` as `/bin/sh -c "exec COMMAND"` with every signal at its
/// default action and none blocked, whatever this process ignores or blocks.
///
/// chaos ignores SIGPIPE (the relays write to sockets the peer may have closed) and the signal handling of
/// the run claims SIGINT and SIGTERM; an ignored disposition survives `exec`, so a child started the
/// ordinary way would never die of SIGPIPE and a shell child could not trap what arrived ignored.
/// Descriptors other than standard input, output and error are not passed on.
struct ChildProcess: Sendable {
    /// The process id (also the command's: the shell `exec`s it).
    let pid: pid_t

    /// Starts `command` with standard input from /dev/null and standard output and error appended to the files, as
    /// the leader of a process group of its own (what it starts is in the group too, and a ``PairGuard`` stops the
    /// whole group if chaos dies; a Ctrl-C reaches chaos, which stops the pair in its order).
    static func spawnShell(_ command: String, standardOutput: String, standardError: String) throws -> ChildProcess {
        let words = ["/bin/sh", "-c", "exec " + command]
        let pid = try spawn(words, named: command, output: (standardOutput, standardError), ownGroup: true)
        return ChildProcess(pid: pid)
    }

    /// Starts `words` (the program's path first) with every signal at its default action and none blocked; standard
    /// input from `standardInput` (a descriptor, passed on as 0) or /dev/null; standard output and error appended to
    /// the files of `output`, or /dev/null; in a process group of its own when `ownGroup`. An error names it `name`.
    static func spawn(
        _ words: [String],
        named name: String,
        standardInput: Int32? = nil,
        output: (standardOutput: String, standardError: String)? = nil,
        ownGroup: Bool
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let standardInput {
            posix_spawn_file_actions_adddup2(&actions, standardInput, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        let append = O_WRONLY | O_CREAT | O_APPEND
        posix_spawn_file_actions_addopen(&actions, 1, output?.standardOutput ?? "/dev/null", append, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, output?.standardError ?? "/dev/null", append, 0o644)
        _ = closeFrom?(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var every = sigset_t()
        var none = sigset_t()
        sigfillset(&every)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &every)
        posix_spawnattr_setsigmask(&attributes, &none)
        var flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK
        if ownGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let arguments: [UnsafeMutablePointer<CChar>?] = words.map { (word: String) in strdup(word) }
        defer { for argument in arguments { free(argument) } }
        var argv = arguments + [nil]
        var pid: pid_t = 0
        let status = posix_spawn(&pid, words[0], &actions, &attributes, &argv, environ)
        guard status == 0 else {
            throw ChaosError(.pair, "cannot start '\(name)': \(String(cString: strerror(status)))")
        }
        return pid
    }

    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), looked up at run time: the Glibc
    /// module does not declare it. Without it, descriptors are still not passed on: chaos opens its own
    /// with close-on-exec (NIO's, the epoll relay's, the capture's).
    private static let closeFrom: CloseFrom? = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: CloseFrom.self)
    }()

    /// Sends `signal` (nothing happens once the process is reaped and its id free).
    func send(_ signal: Int32) { _ = kill(pid, signal) }

    /// Reaps every exited child of this process without waiting: each one's id and status (128 + the signal
    /// for a process a signal ended). chaos starts no children but the pair's and its ``PairGuard``.
    static func reapExited() -> [(pid: pid_t, status: Int32)] {
        var reaped: [(pid: pid_t, status: Int32)] = []
        while true {
            var status: Int32 = 0
            let pid = waitpid(-1, &status, WNOHANG)
            guard pid > 0 else { return reaped }
            let signal = status & 0x7f
            reaped.append((pid, signal == 0 ? (status >> 8) & 0xff : 128 + signal))
        }
    }
}
