import CChaosEpoll
import Glibc
import NIOCore

/// A listening socket watched by every loop of a ``PassthroughLoopGroup``; epoll wakes one loop
/// per burst of connections, and that loop accepts them and hands each to `onAccept`.
final class PassthroughListener: Sendable {
    /// The address actually bound.
    let address: SocketAddress
    private let fd: Int32
    private let acceptors: [Acceptor]

    /// Accepts on one loop. Touched only on that loop's thread.
    private final class Acceptor: PassthroughSelectable, @unchecked Sendable {
        let loop: PassthroughLoop
        let fd: Int32
        let onAccept: @Sendable (Int32, PassthroughLoop) -> Void
        var key: UInt64?

        init(loop: PassthroughLoop, fd: Int32, onAccept: @escaping @Sendable (Int32, PassthroughLoop) -> Void) {
            self.loop = loop
            self.fd = fd
            self.onAccept = onAccept
        }

        func handle(events: UInt32, slot: Int) {
            for _ in 0..<64 {
                let client = chaos_accept(fd)
                if client >= 0 {
                    onAccept(client, loop)
                } else if -client != EINTR, -client != ECONNABORTED {
                    return
                }
            }
        }
    }

    /// Binds `address` and starts accepting on every loop of `group`.
    init(address: SocketAddress, backlog: Int32, group: PassthroughLoopGroup,
         onAccept: @escaping @Sendable (Int32, PassthroughLoop) -> Void) async throws(RawSocketError) {
        let fd = try RawSocket.listen(on: address, backlog: backlog)
        self.fd = fd
        self.address = RawSocket.boundAddress(fd) ?? address
        acceptors = group.loops.map { Acceptor(loop: $0, fd: fd, onAccept: onAccept) }
        for acceptor in acceptors {
            acceptor.key = await acceptor.loop.submit { acceptor.loop.register(acceptor, descriptors: [fd], exclusive: true) }
        }
    }

    /// Stops accepting and closes the socket: clients are refused from then on.
    func close() async {
        for acceptor in acceptors {
            await acceptor.loop.submit {
                if let key = acceptor.key { acceptor.loop.unregister(key: key, descriptors: [acceptor.fd]) }
                acceptor.key = nil
            }
        }
        _ = Glibc.close(fd)
    }
}
