import CChaosEpoll
import Glibc
import NIOCore

extension Channel {
    /// The kernel's `tcpi_bytes_acked`, `tcpi_notsent_bytes` and bytes sent at least once of this channel's
    /// socket and whether its connection is over, read on its event loop without a hop (nil when the channel is closed or is
    /// not a TCP socket). Call on the event loop.
    func kernelAcknowledgements() -> (bytesAcked: UInt64, notSent: UInt32, sentOnce: UInt64, over: Bool)? {
        eventLoop.preconditionInEventLoop()
        guard isActive, let provider = self as? any SocketOptionProvider else { return nil }
        var result: (bytesAcked: UInt64, notSent: UInt32, sentOnce: UInt64, over: Bool)?
        // On the event loop the option is read at once and the future is already complete.
        provider.unsafeGetSocketOption(level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_INFO))
            .assumeIsolated()
            .whenSuccess { (info: chaos_tcp_info) in
                var info = info
                result = (
                    chaos_tcp_info_bytes_acked(&info), chaos_tcp_info_notsent_bytes(&info),
                    chaos_tcp_info_bytes_sent_once(&info), chaos_tcp_info_is_closed(&info) != 0
                )
            }
        return result
    }
}

/// What a leg's TCP counted so far: bytes received from its peer, bytes the peer acknowledged, segments retransmitted.
struct TCPCounters: Sendable {
    var received: UInt64
    var acknowledged: UInt64
    var retransmissions: UInt32

    init(received: UInt64, acknowledged: UInt64, retransmissions: UInt32) {
        self.received = received
        self.acknowledged = acknowledged
        self.retransmissions = retransmissions
    }

    /// The counters of the TCP socket `fd` (any socket, not only a channel's: the tests' own), or nil when it is not one.
    init?(socket fd: Int32) {
        var info = chaos_tcp_info()
        var length = socklen_t(MemoryLayout<chaos_tcp_info>.size)
        guard getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0 else { return nil }
        self.init(info)
    }

    /// The counters `info` holds.
    init(_ info: chaos_tcp_info) {
        var info = info
        self.init(
            received: chaos_tcp_info_bytes_received(&info),
            acknowledged: chaos_tcp_info_bytes_acked(&info),
            retransmissions: chaos_tcp_info_total_retrans(&info)
        )
    }
}

extension Channel {
    /// Whether the socket's receive queue holds anything not read yet (`SO_MEMINFO`'s receive memory); nil when the
    /// socket cannot say.
    func receiveQueueHolds() -> Bool? {
        eventLoop.preconditionInEventLoop()
        guard let provider = self as? any SocketOptionProvider else { return nil }
        // SO_MEMINFO (55) fills as much of its array as asked: the first is the receive queue's memory.
        var result: Bool?
        provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(55))
            .assumeIsolated()
            .whenSuccess { (receiveMemory: UInt32) in result = receiveMemory > 0 }
        return result
    }

    /// This channel's socket's ``TCPCounters``, read on its event loop without a hop (nil when it is not a TCP socket, or
    /// the kernel does not say). Call on the event loop; a socket whose connection is over still answers.
    func tcpCounters() -> TCPCounters? {
        eventLoop.preconditionInEventLoop()
        guard let provider = self as? any SocketOptionProvider else { return nil }
        var result: TCPCounters?
        provider.unsafeGetSocketOption(level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_INFO))
            .assumeIsolated()
            .whenSuccess { (info: chaos_tcp_info) in result = TCPCounters(info) }
        return result
    }
}
