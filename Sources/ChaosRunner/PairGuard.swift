import ChaosCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Stops the pair when chaos dies without stopping it (SIGKILL, the OOM killer, a crash): a CI job whose chaos was
/// killed must not leave a server holding its port for the next run.
///
/// A small shell process, started once per run in a process group of its own (a Ctrl-C or a signal to chaos's group
/// does not reach it), reads the process groups of the pair's members from a pipe whose other end only chaos holds.
/// When chaos says `done` (it stopped the pair itself) the guard exits; when the pipe ends without it, chaos is gone,
/// and the guard sends SIGTERM to every group it was told of, then SIGKILL two seconds later. Each pair member leads a
/// group of its own (``ChildProcess/spawnShell(_:standardOutput:standardError:)``), so what it started goes too.
final class PairGuard: Sendable {
    /// The guard's script: the groups it is told of (`N`), and of those that ended (`-N`), then `done` (exit) or the
    /// end of its input (stop the groups it still holds).
    static let script = """
        groups=
        while read -r line; do
          case $line in
            done) exit 0 ;;
            -|-*[!0-9]*) ;;
            -*) gone=${line#-}; kept=; for g in $groups; do [ "$g" = "$gone" ] || kept="$kept $g"; done; groups=$kept ;;
            ''|*[!0-9]*) ;;
            *) groups="$groups $line" ;;
          esac
        done
        for g in $groups; do kill -TERM -"$g" 2>/dev/null; done
        sleep 2
        for g in $groups; do kill -KILL -"$g" 2>/dev/null; done
        """

    /// chaos's end of the pipe (close-on-exec: no pair process holds it); -1 once closed.
    private let writeEnd: Mutex<Int32>
    /// The guard process.
    let pid: pid_t

    /// Starts the guard. A guard that cannot start is a `pair` error: without it a killed chaos would leave the pair.
    init() throws {
        var ends: [Int32] = [-1, -1]
        // pipe2 is not in the Glibc module; both ends close on exec before any child can be spawned with them (the
        // pair's spawns close every descriptor above 2 anyway).
        guard pipe(&ends) == 0 else {
            throw ChaosError(.pair, "cannot make the pipe of the pair's guard: \(String(cString: strerror(errno)))")
        }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        do {
            pid = try ChildProcess.spawn(["/bin/sh", "-c", Self.script], named: "the pair's guard", standardInput: ends[0], ownGroup: true)
        } catch {
            close(ends[0])
            close(ends[1])
            throw error
        }
        close(ends[0])
        writeEnd = Mutex(ends[1])
    }

    /// Tells the guard of a pair member's process group (its id: the member leads it).
    func watch(group: pid_t) { send("\(group)\n") }

    /// Tells the guard that a group has no process left: its id may be another's some day, never to be signalled.
    func forget(group: pid_t) { send("-\(group)\n") }

    /// The pair is stopped: the guard exits without signalling anyone (chaos's child until chaos reaps it or exits).
    func release() {
        send("done\n")
        writeEnd.withLock { end in
            if end >= 0 { close(end) }
            end = -1
        }
    }

    private func send(_ line: String) {
        writeEnd.withLock { end in
            guard end >= 0 else { return }
            let bytes = Array(line.utf8)
            var written = 0
            while written < bytes.count {
                let n = bytes.withUnsafeBytes { write(end, $0.baseAddress! + written, $0.count - written) }
                if n > 0 {
                    written += n
                } else if n < 0, errno == EINTR {
                    continue
                } else {
                    return  // the guard is gone (EPIPE; chaos ignores SIGPIPE): nothing more to tell it
                }
            }
        }
    }
}
