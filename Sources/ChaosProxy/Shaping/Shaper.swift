package import ChaosCore
package import NIOCore

/// The state machine behind one direction of one connection: a bounded, ordered queue of
/// bytes (and the half-close that follows them) released according to ``ShapingSettings``.
///
/// It never touches a channel: the ``ShapingHandler`` asks it what to do next and does it.
/// Time is plain nanoseconds handed in by the caller, so it is tested without sockets or clocks.
package struct Shaper {
    /// What passes through: bytes, or the half-close (FIN) that must follow them.
    package enum Item: Equatable {
        case data(ByteBuffer)
        case shutdownOutput
    }

    /// What the handler should do next.
    package enum Next: Equatable {
        /// Write (and flush) this item now.
        case emit(Item)
        /// Nothing can go before this time (nanoseconds); ask again then.
        case wait(until: Int64)
        /// Nothing to do until more data arrives or the settings change.
        case idle
    }

    private struct Entry {
        var item: Item
        var releaseAt: Int64
    }

    private var queue = CircularBuffer<Entry>(initialCapacity: 4)
    /// Bytes held right now.
    package private(set) var heldBytes = 0
    /// The current settings.
    package private(set) var settings = ShapingSettings.none
    /// Whether the producer should stop reading (held bytes passed the high-water mark and
    /// have not yet fallen to the low-water mark).
    package private(set) var isPressured = false
    private var lastRelease: Int64 = .min
    private var linkFreeAt: Int64 = .min
    private var generator: SeededGenerator
    /// Where the loss model's chain is.
    private var lossState = LossState()
    /// A write too big for the MTU black hole came: nothing passes until the fault ends.
    package private(set) var isBlackHoled = false
    /// The connection's mobile path (radio, NAT, where their events go); nil: bytes cross no radio and no NAT.
    package var path: ConnectionPath?
    /// Which way these bytes travel (named in the path's events).
    package var direction = Direction.upstream
    /// How far behind a bandwidth cap may fall and then catch up, nanoseconds.
    static let burst: Int64 = 50_000_000
    /// Above this many held bytes the producer is paused.
    package let highWater: Int
    /// At or below this many held bytes a paused producer resumes.
    package let lowWater: Int

    /// A shaper holding at most about `highWater` bytes; `generator` draws jitter and slice delays.
    package init(highWater: Int = 1 << 20, generator: SeededGenerator) {
        self.highWater = max(highWater, 1)
        self.lowWater = max(highWater / 2, 1)
        self.generator = generator
    }

    /// True when nothing is held and nothing shapes: the handler may write straight through.
    package var isPassThrough: Bool { queue.isEmpty && settings == .none && path?.isDead != true }

    /// Replaces the settings (a fault began or ended) at `now`. Held data keeps its place and order.
    package mutating func update(_ settings: ShapingSettings, now: Int64 = 0) {
        self.settings = settings
        if settings.natIdleTimeout != nil { path?.natBegan(at: now) }
        if settings.bytesPerSecond == nil { linkFreeAt = .min }
        if settings.mtuPayload == nil { isBlackHoled = false }
        if settings.loss == nil { lossState = LossState() }
    }

    /// Queues `item`, due after the current latency (plus jitter, never before an earlier item).
    /// Returns true when this made the shaper pressured.
    @discardableResult
    package mutating func enqueue(_ item: Item, now arrival: Int64) -> Bool {
        var now = arrival
        if let path {
            if let idleTimeout = settings.natIdleTimeout { path.natSaw(at: arrival, idleTimeout: idleTimeout) }
            // The radio: after its idle tail, the bytes wait for its promotion before they go.
            if let radio = settings.radio, !path.isDead { now = path.radioAdmit(at: arrival, radio) }
        }
        var due = now.saturatingAdding(settings.latency)
        if settings.jitter > 0 {
            // A jitter past 2^61 ns (73 years) means "any delay": held there, the draw cannot overflow.
            let jitter = min(settings.jitter, 1 << 61)
            let width = UInt64(jitter) * 2 + 1
            due = due.saturatingAdding(Int64(generator.next(upperBound: width)) - jitter)
        }
        if item == .shutdownOutput { due = due.saturatingAdding(settings.finDelay) }
        // When these bytes would arrive on their own; they still come after everything ahead of them.
        let own = max(due, now)
        due = max(own, lastRelease)
        if case .data(let buffer) = item {
            heldBytes += buffer.readableBytes
            if let payload = settings.mtuPayload, buffer.readableBytes > payload { isBlackHoled = true }
            if let model = settings.loss {
                appendWithLoss(buffer, due: due, own: own, model)
            } else {
                queue.append(Entry(item: item, releaseAt: due))
                lastRelease = due
            }
        } else {
            queue.append(Entry(item: item, releaseAt: due))
            lastRelease = due
        }
        if !isPressured, heldBytes > highWater {
            isPressured = true
            return true
        }
        return false
    }

    /// The next thing to do at `now`. Call repeatedly until it is not `.emit`.
    package mutating func next(now: Int64) -> Next {
        guard var head = queue.first else { return .idle }
        if settings.hold || isBlackHoled || path?.isDead == true { return .idle }
        if head.releaseAt > now { return .wait(until: head.releaseAt) }
        guard case .data(var buffer) = head.item else {
            queue.removeFirst()
            return .emit(.shutdownOutput)
        }
        if settings.bytesPerSecond != nil, linkFreeAt > now { return .wait(until: linkFreeAt) }
        var limit = buffer.readableBytes
        if let slice = settings.sliceBytes { limit = min(limit, pieceSize(slice)) }
        if let rate = settings.bytesPerSecond { limit = min(limit, Int(clamping: max(rate / 100, 512))) }
        let piece: ByteBuffer
        if limit < buffer.readableBytes {
            piece = buffer.readSlice(length: limit)!
            head.item = .data(buffer)
            if settings.sliceBytes != nil { head.releaseAt = now.saturatingAdding(draw(settings.sliceDelay)) }
            queue[queue.startIndex] = head
            lastRelease = max(lastRelease, head.releaseAt)
        } else {
            piece = buffer
            queue.removeFirst()
        }
        heldBytes -= piece.readableBytes
        if let rate = settings.bytesPerSecond {
            // A token bucket holding `burst` worth of time: a timer that fires late is made up for,
            // so the long-run rate stays exact on a loaded machine.
            linkFreeAt = max(linkFreeAt, now - Self.burst)
                .saturatingAdding(Int64(piece.readableBytes) * 1_000_000_000 / max(rate, 1))
        }
        return .emit(.data(piece))
    }

    /// Checks the low-water mark; returns true when this released the pressure.
    package mutating func relievePressure() -> Bool {
        guard isPressured, heldBytes <= lowWater else { return false }
        isPressured = false
        return true
    }

    /// Drops everything held (the connection is gone). Returns the number of bytes dropped.
    @discardableResult
    package mutating func discardAll() -> Int {
        let dropped = heldBytes
        queue.removeAll()
        heldBytes = 0
        isPressured = false
        return dropped
    }

    /// Queues `buffer` due at `due` (`own`: when it would arrive were nothing ahead of it), cut where the loss model
    /// loses a piece: a lost piece arrives its retransmission delay after `own`, and the bytes from it on wait for it
    /// (order kept).
    private mutating func appendWithLoss(_ buffer: ByteBuffer, due: Int64, own: Int64, _ model: LossModel) {
        var segmentStart = 0
        var segmentDue = due
        var offset = 0
        let count = buffer.readableBytes
        while offset < count {
            let delay = lossState.delay(model, &generator)
            if delay > 0 {
                let retransmitted = max(segmentDue, own.saturatingAdding(delay))
                path?.retransmitted(direction, delay: delay, at: own)
                if offset > segmentStart {
                    queue.append(
                        Entry(
                            item: .data(buffer.getSlice(at: buffer.readerIndex + segmentStart, length: offset - segmentStart)!),
                            releaseAt: segmentDue
                        )
                    )
                    segmentStart = offset
                }
                segmentDue = retransmitted
            }
            offset += LossModel.pieceBytes
        }
        queue.append(
            Entry(
                item: .data(buffer.getSlice(at: buffer.readerIndex + segmentStart, length: count - segmentStart)!),
                releaseAt: segmentDue
            )
        )
        lastRelease = segmentDue
    }

    /// A slice's size: `size`, or with a variation, drawn in `size - variation ... size + variation` (at least 1).
    private mutating func pieceSize(_ size: Int) -> Int {
        guard settings.sliceVariation > 0 else { return size }
        let low = Int64(max(1, size - settings.sliceVariation))
        let high = Int64(size) + Int64(settings.sliceVariation)
        return Int(draw(low...high))
    }

    private mutating func draw(_ range: ClosedRange<Int64>) -> Int64 {
        if range.lowerBound >= range.upperBound { return range.lowerBound }
        let (span, overflow) = range.upperBound.subtractingReportingOverflow(range.lowerBound)
        let width = overflow || span == .max ? UInt64(Int64.max) : UInt64(span) + 1
        return range.lowerBound.saturatingAdding(Int64(generator.next(upperBound: width)))
    }
}
