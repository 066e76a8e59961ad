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

    /// Starts `command` with standard input from /dev/null and standard output and error appended to the files.
    static func spawnShell(_ command: String, standardOutput: String, standardError: String) throws -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, standardOutput, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, standardError, O_WRONLY | O_CREAT | O_APPEND, 0o644)
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
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let words: [String] = ["/bin/sh", "-c", "exec " + command]
        let arguments: [UnsafeMutablePointer<CChar>?] = words.map { (word: String) in strdup(word) }
        defer { for argument in arguments { free(argument) } }
        var argv = arguments + [nil]
        var pid: pid_t = 0
        let status = posix_spawn(&pid, "/bin/sh", &actions, &attributes, &argv, environ)
        guard status == 0 else {
            throw ChaosError(.pair, "cannot start '\(command)': \(String(cString: strerror(status)))")
        }
        return ChildProcess(pid: pid)
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
    /// for a process a signal ended). chaos starts no children but the pair's.
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
