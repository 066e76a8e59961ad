import Glibc
import NIOCore
import NIOSSL
import NIOTLS

/// Delivered means acknowledged under TLS too: a leg's peer has taken a plaintext byte once its TCP acknowledged the
/// end of the TLS record that carried it. The map keeps, at each flush of plaintext through the leg's TLS handler,
/// how much plaintext had gone in and how many wire bytes had come out by then (the handler encrypts and writes
/// everything flushed, synchronously, once its handshake is done); an acknowledged wire offset covers the plaintext
/// of the last such point at or below it. Lives on the leg's event loop.
final class TLSRecordMap {
    /// Wire bytes written to the socket so far (records, handshake messages, alerts).
    private(set) var wire: Int64 = 0
    /// Plaintext bytes handed to the TLS handler so far.
    private(set) var plaintext: Int64 = 0
    /// Whether the handshake is over (before it, the TLS handler holds what it is given).
    var handshakeDone = false
    /// Whether the peer closed its side (close_notify, or a FIN). What a TLS stack does with records that arrive
    /// after it sent close_notify differs (Python's and OpenSSL's shutdown read and drop them, swift-nio-ssl's
    /// closing handler still hands them to its application), while its TCP acknowledges them either way: plaintext
    /// written after that is covered only as taken after close (see ``TrafficEvent/Kind/acknowledgedAfterClose(_:upTo:)``).
    var peerClosed = false
    /// The peer's TCP connection ended after its close_notify (NIO's TLS handler calls that EOF unclean when chaos had
    /// not answered with its own yet): an orderly close, whenever the relay learns of it.
    var endedAfterCloseNotify = false
    /// The peer's TCP FIN reached the socket (seen below the TLS handler). A socket that closed without one was reset
    /// (NIO closes it on the socket's error or hang-up, or a failed write, with no error event first), which the TLS
    /// handler also calls an unclean shutdown: that is TCP's end, not the peer's TLS.
    var receivedTCPFIN = false
    /// (plaintext end, wire end, written after the peer closed) points not yet covered by an acknowledgement, oldest first.
    private var points: [(plaintext: Int64, wire: Int64, afterClose: Bool)] = []
    private var pointsStart = 0
    /// Told of wire bytes as they are written (the leg's acknowledgement tracker counts wire bytes).
    var onWire: ((Int) -> Void)?
    /// Told just before the socket closes, while what its peer acknowledged can still be read (a TLS handler that
    /// answers the peer's close_notify closes the channel itself: no FIN reaches the relay first).
    var onClosing: (() -> Void)?
    /// The wire meter's place in the pipeline, below the TLS handler.
    var belowTLS: ChannelHandlerContext?

    /// Ends the leg under its TLS handler, so that no close_notify goes out: a FIN (`all` false) or a close.
    func shutdownBelowTLS(all: Bool) {
        guard let context = belowTLS else { return }
        context.flush()
        context.close(mode: all ? .all : .output, promise: nil)
    }

    /// Resets the leg under its TLS handler: a RST and no close_notify, as a reset is on the wire (through the handler,
    /// a close sends close_notify and waits for the peer's before the socket closes).
    func resetBelowTLS(_ channel: any Channel) {
        guard let context = belowTLS, let provider = channel as? any SocketOptionProvider else { return channel.closeWithReset() }
        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in context.close(mode: .all, promise: nil) }
    }

    func wroteWire(_ count: Int) {
        wire += Int64(count)
        onWire?(count)
    }

    func wrotePlaintext(_ count: Int) { plaintext += Int64(count) }

    /// After a flush went through the TLS handler: everything handed to it is on the wire now, if the handler wrote
    /// since `wire` was `before` (a handler that is closing fails the writes instead: those bytes are never sent).
    func flushed(wroteSince before: Int64) {
        guard handshakeDone, plaintext > (points.last?.plaintext ?? 0), wire > before else { return }
        points.append((plaintext, wire, peerClosed))
    }

    /// The wire offset of the last point (0 before the first).
    var lastPointWire: Int64 { points.last?.wire ?? 0 }

    /// The plaintext offsets last reported delivered, and taken after close.
    private var reported: Int64 = 0
    private var reportedAfterClose: Int64 = 0

    /// The plaintext offsets `wireAcknowledged` wire bytes cover, each when it moved past the last one reported:
    /// `delivered` up to the last point written before the peer closed, `afterClose` up to the last one after.
    func newlyCovered(by wireAcknowledged: Int64) -> (delivered: Int64?, afterClose: Int64?) {
        let covered = plaintext(coveredBy: wireAcknowledged)
        var result: (delivered: Int64?, afterClose: Int64?) = (nil, nil)
        if covered.delivered > reported {
            reported = covered.delivered
            result.delivered = covered.delivered
        }
        if covered.afterClose > max(reportedAfterClose, reported) {
            reportedAfterClose = covered.afterClose
            result.afterClose = covered.afterClose
        }
        return result
    }

    /// The plaintext offsets covered by `wireAcknowledged` wire bytes: before the peer closed, and after it.
    func plaintext(coveredBy wireAcknowledged: Int64) -> (delivered: Int64, afterClose: Int64) {
        while pointsStart < points.count, points[pointsStart].wire <= wireAcknowledged {
            let point = points[pointsStart]
            if point.afterClose { coveredAfterClose = point.plaintext } else { coveredBeforeClose = point.plaintext }
            pointsStart += 1
        }
        if pointsStart > 64, pointsStart * 2 > points.count {
            points.removeFirst(pointsStart - 1)
            pointsStart = 1
        }
        return (coveredBeforeClose, coveredAfterClose)
    }

    private var coveredBeforeClose: Int64 = 0
    private var coveredAfterClose: Int64 = 0
}

/// Below a leg's TLS handler: counts the wire bytes written, and notes the peer's TCP FIN.
final class TLSWireMeter: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    let map: TLSRecordMap

    init(map: TLSRecordMap) { self.map = map }

    func handlerAdded(context: ChannelHandlerContext) { map.belowTLS = context }
    func handlerRemoved(context: ChannelHandlerContext) { map.belowTLS = nil }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        map.wroteWire(unwrapOutboundIn(data).readableBytes)
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event { map.receivedTCPFIN = true }
        context.fireUserInboundEventTriggered(event)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all { map.onClosing?() }
        context.close(mode: mode, promise: promise)
    }
}

/// Above a leg's TLS handler: counts the plaintext handed to it and marks the map at each flush (and once the
/// handshake is over, when the handler writes what it held).
final class TLSPlaintextMeter: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    let map: TLSRecordMap

    init(map: TLSRecordMap) { self.map = map }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        map.wrotePlaintext(unwrapOutboundIn(data).readableBytes)
        context.write(data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        let before = map.wire
        context.flush()
        map.flushed(wroteSince: before)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Seen here as it happens: a relay not yet wired learns of it later, after the inputClosed that follows it.
        if map.peerClosed, (error as? NIOSSLError) == .uncleanShutdown { map.endedAfterCloseNotify = true }
        context.fireErrorCaught(error)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            // What was flushed before is on the wire (and may be acknowledged); nothing after is taken.
            context.flush()
            map.flushed(wroteSince: map.lastPointWire)
            map.peerClosed = true
        }
        if case TLSUserEvent.handshakeCompleted = event {
            // What the handler held for the handshake may have gone out just before this event.
            map.handshakeDone = true
            let before = map.lastPointWire
            context.flush()
            map.flushed(wroteSince: before)
        }
        context.fireUserInboundEventTriggered(event)
    }
}
