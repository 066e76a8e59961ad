package import ChaosCore
package import NIOCore

/// Tells the relay on the same channel that the shaper holds too much (stop reading the
/// producer) or has drained enough (read again). Fired inbound as a user event.
package enum ShapingPressure: Sendable, Equatable {
    case paused
    case resumed
}

/// An outbound handler that shapes everything written to its channel (one direction of a
/// proxied connection) with a ``Shaper``: latency with jitter, bandwidth caps, holds (partition,
/// stall, blackout), slicing. A half-close (`close(mode: .output)`) waits behind the data.
/// It tells the relay when it starts or stops holding bytes (``onHoldingChanged``): the relay's
/// state machine passes a FIN on only once none are held.
///
/// With nothing to shape it passes writes straight through at no cost.
package final class ShapingHandler: ChannelOutboundHandler, RemovableChannelHandler {
    package typealias OutboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    private var shaper: Shaper
    private var context: ChannelHandlerContext?
    private var wakeup: Scheduled<Void>?
    private var wakeupAt: Int64 = .max
    /// Called for every write that reached the socket (the bytes `written`), when set.
    var onDelivered: ((ByteBuffer) -> Void)?
    /// Called when the shaper starts holding bytes (`true`) or holds none any more (`false`), when set.
    var onHoldingChanged: ((Bool) -> Void)?
    /// When the FIN that a half-close passes on was read (event loop uptime, nanoseconds): a FIN
    /// that waited for the bytes before it is still due `latency` after it was read, not after they went.
    var finReadAt: Int64?
    private var reportedHolding = false

    /// The seed of the chain that draws, on the kernel path, which of the segments of the bytes written here are lost
    /// (``KernelLoss``): the loss emulated here otherwise.
    let kernelLossSeed: UInt64

    /// A handler with its own shaper; `generator` draws jitter and slice delays.
    package init(highWater: Int = 1 << 20, generator: SeededGenerator) {
        self.shaper = Shaper(highWater: highWater, generator: generator)
        var lossGenerator = generator.fork("kernel-loss")
        kernelLossSeed = lossGenerator.next()
    }

    /// Bytes held right now.
    package var heldBytes: Int { shaper.heldBytes }

    /// Joins the connection's mobile path (radio, NAT); `direction`: which way the bytes written here travel.
    package func join(_ path: ConnectionPath, direction: Direction) {
        shaper.path = path
        shaper.direction = direction
    }

    /// Applies new settings; call on the channel's event loop.
    package func apply(_ settings: ShapingSettings) {
        shaper.update(settings, now: context.map(now) ?? 0)
        if let context { pump(context) }
    }

    /// Drops what is held (the connection is being cut).
    package func discardHeld() {
        shaper.discardAll()
        wakeup?.cancel()
        wakeup = nil
        wakeupAt = .max
        reportHolding()
    }

    /// Runs `body` once every write handed to the channel so far has reached the socket (at once
    /// when the handler is not in a pipeline).
    func whenWritten(_ body: @escaping () -> Void) {
        guard let context else { return body() }
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)), promise: written)
        let loopBound = NIOLoopBound(body, eventLoop: context.eventLoop)
        written.futureResult.whenComplete { _ in loopBound.value() }
    }

    private func reportHolding() {
        let holding = shaper.heldBytes > 0
        guard holding != reportedHolding else { return }
        reportedHolding = holding
        onHoldingChanged?(holding)
    }

    package func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    package func handlerRemoved(context: ChannelHandlerContext) {
        discardHeld()
        self.context = nil
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if shaper.isPassThrough {
            send(unwrapOutboundIn(data), context: context, promise: promise)
            return
        }
        if shaper.enqueue(.data(unwrapOutboundIn(data)), now: now(context)) {
            context.fireUserInboundEventTriggered(ShapingPressure.paused)
        }
        promise?.succeed()
        pump(context)
    }

    package func flush(context: ChannelHandlerContext) {
        if shaper.isPassThrough { context.flush() }
    }

    package func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .output else {
            discardHeld()
            context.close(mode: mode, promise: promise)
            return
        }
        guard !shaper.isPassThrough else {
            shutdownOutput(context: context, promise: promise)
            return
        }
        shaper.enqueue(.shutdownOutput, now: min(finReadAt ?? .max, now(context)))
        promise?.succeed()
        pump(context)
    }

    private func send(_ buffer: ByteBuffer, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        guard let onDelivered else {
            context.write(wrapOutboundOut(buffer), promise: promise)
            return
        }
        let written = promise ?? context.eventLoop.makePromise()
        let callback = NIOLoopBound(onDelivered, eventLoop: context.eventLoop)
        written.futureResult.whenSuccess { callback.value(buffer) }
        context.write(wrapOutboundOut(buffer), promise: written)
    }

    /// Sends FIN once every byte written before it has reached the socket. When the channel's
    /// input is already closed (its peer sent FIN first), NIO turns a half-close into a full
    /// close that fails the writes still pending, losing their bytes: so the FIN waits for them.
    private func shutdownOutput(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        let drained = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)), promise: drained)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        drained.futureResult.whenComplete { _ in loopBound.value.close(mode: .output, promise: promise) }
    }

    private func now(_ context: ChannelHandlerContext) -> Int64 {
        Int64(truncatingIfNeeded: context.eventLoop.now.uptimeNanoseconds)
    }

    private func pump(_ context: ChannelHandlerContext) {
        var wrote = false
        loop: while true {
            switch shaper.next(now: now(context)) {
            case .emit(.data(let buffer)):
                send(buffer, context: context, promise: nil)
                wrote = true
                if shaper.settings.sliceBytes != nil {
                    context.flush()  // each slice its own segment
                    wrote = false
                }
            case .emit(.shutdownOutput):
                wrote = false
                shutdownOutput(context: context, promise: nil)
            case .wait(let until):
                schedule(at: until, context: context)
                break loop
            case .idle:
                break loop
            }
        }
        if wrote { context.flush() }
        if shaper.relievePressure() { context.fireUserInboundEventTriggered(ShapingPressure.resumed) }
        reportHolding()
    }

    private func schedule(at deadline: Int64, context: ChannelHandlerContext) {
        if wakeup != nil, wakeupAt <= deadline { return }
        wakeup?.cancel()
        wakeupAt = deadline
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        wakeup = context.eventLoop.scheduleTask(deadline: NIODeadline.uptimeNanoseconds(UInt64(max(deadline, 0)))) {
            let (handler, context) = loopBound.value
            handler.wakeup = nil
            handler.wakeupAt = .max
            handler.pump(context)
        }
    }
}

@available(*, unavailable)
extension ShapingHandler: Sendable {}
