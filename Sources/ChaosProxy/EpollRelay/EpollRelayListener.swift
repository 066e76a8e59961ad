import CChaosEpoll
import Glibc
import Logging
import NIOCore

/// A listening socket watched by every loop of a ``EpollRelayLoopGroup``; epoll wakes one loop
/// per burst of connections, and that loop accepts them and hands each to `onAccept`.
final class EpollRelayListener: Sendable {
    /// The address actually bound.
    let address: SocketAddress
    private let fd: Int32
    private let acceptors: [Acceptor]

    /// Accepts on one loop. Touched only on that loop's thread.
    private final class Acceptor: EpollRelaySelectable, @unchecked Sendable {
        let loop: EpollRelayLoop
        let fd: Int32
        let onAccept: @Sendable (Int32, EpollRelayLoop) -> Void
        let logger: Logger
        var key: UInt64?
        /// The listener closed: never register again.
        var closed = false

        init(loop: EpollRelayLoop, fd: Int32, logger: Logger, onAccept: @escaping @Sendable (Int32, EpollRelayLoop) -> Void) {
            self.loop = loop
            self.fd = fd
            self.logger = logger
            self.onAccept = onAccept
        }

        func handle(events: UInt32, slot: Int) {
            for _ in 0..<64 {
                let client = chaos_accept(fd)
                if client >= RawSocket.descriptorCeiling {
                    // Too few descriptors left for this client and its upstream: refuse it.
                    RawSocket.closeWithReset(client)
                    return pause(reason: "too few file descriptors left")
                } else if client >= 0 {
                    onAccept(client, loop)
                } else if -client == EMFILE || -client == ENFILE || -client == ENOBUFS || -client == ENOMEM {
                    return pause(reason: String(cString: strerror(-client)))
                } else if -client != EINTR, -client != ECONNABORTED {
                    return
                }
            }
        }

        /// Out of descriptors (or close to it) or memory: the listener stays readable, so rather
        /// than spin on it, this loop stops watching it for 100 ms (clients wait in the backlog).
        private func pause(reason: String) {
            guard let key else { return }
            logger.warning("not accepting for 100 ms", metadata: ["reason": "\(reason)"])
            loop.unregister(key: key, descriptors: [fd])
            self.key = nil
            loop.schedule(after: 100_000_000) { [self] in
                if !closed, self.key == nil { self.key = try? loop.register(self, descriptors: [fd], exclusive: true) }
            }
        }
    }

    /// Binds `address` and starts accepting on every loop of `group`.
    init(
        address: SocketAddress,
        backlog: Int32,
        group: EpollRelayLoopGroup,
        logger: Logger,
        onAccept: @escaping @Sendable (Int32, EpollRelayLoop) -> Void
    ) async throws(RawSocketError) {
        let fd = try RawSocket.listen(on: address, backlog: backlog)
        self.fd = fd
        self.address = RawSocket.address(fd, peer: false) ?? address
        acceptors = group.loops.map { Acceptor(loop: $0, fd: fd, logger: logger, onAccept: onAccept) }
        for acceptor in acceptors {
            let failure =
                await acceptor.loop.submit { () -> Int32 in
                    do {
                        acceptor.key = try acceptor.loop.register(acceptor, descriptors: [fd], exclusive: true)
                        return 0
                    } catch {
                        return (error as? RawSocketError)?.code ?? EINVAL
                    }
                } ?? ESHUTDOWN
            if failure != 0 {
                await close()
                throw RawSocketError(call: "epoll_ctl", code: failure)
            }
        }
    }

    /// Stops accepting and closes the socket: clients are refused from then on.
    func close() async {
        for acceptor in acceptors {
            await acceptor.loop.submit {
                if let key = acceptor.key { acceptor.loop.unregister(key: key, descriptors: [acceptor.fd]) }
                acceptor.key = nil
                acceptor.closed = true
            }
        }
        _ = Glibc.close(fd)
    }
}
