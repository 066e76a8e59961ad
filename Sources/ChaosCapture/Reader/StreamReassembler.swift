/// Reassembles one direction of a TCP flow: puts segments in sequence order, drops retransmitted
/// and overlapping bytes (the first copy wins), holds segments that arrive ahead of a hole, and
/// declares a hole capture loss once the receiver acknowledged past it (or at a FIN, an RST or the
/// end of the capture). It never invents bytes.
///
/// Offsets are relative to the first payload byte and 64-bit, so sequence-number wrap-around is
/// handled by unwrapping each 32-bit number next to the expected offset.
struct StreamReassembler {
    /// Bytes in sequence order, ready to report, and the capture loss counted before them (a TLS decryption stops
    /// at a hole).
    typealias Deliver = (_ bytes: [UInt8], _ lossBefore: Int) throws -> Void

    /// The most out-of-order bytes held before the oldest hole is given up as capture loss.
    static let maximumHeldBytes = 32 << 20

    /// Whether the first sequence number is known.
    private(set) var started = false
    /// The sequence number of offset 0.
    private var base: UInt32 = 0
    /// The next offset expected.
    private(set) var next: Int64 = 0
    /// Segments ahead of a hole, by start offset (sorted).
    private var held: [(start: Int64, bytes: [UInt8])] = []
    private var heldBytes = 0
    /// The offset of the FIN, once seen.
    private(set) var finOffset: Int64?
    /// The FIN was reached in order and reported.
    private(set) var finReported = false
    /// The highest offset the other side acknowledged.
    private var acknowledged: Int64 = 0
    /// The acknowledged count of reported bytes last handed out by ``takeAcknowledgedBytes()``.
    private var acknowledgedReported: Int64 = 0
    /// The end of the highest retransmission seen: bytes sent again before the receiver acknowledged them had gone
    /// unacknowledged for a retransmission timeout (a dead path dropped them after the capture saw them, or the
    /// network lost them).
    private var retransmittedUpTo: Int64 = 0
    /// Whether bytes seen sent and never seen acknowledged may have reached the receiver: not while a retransmission
    /// of them waits for its acknowledgement (as the live relay judges a leg after a dead path in the kernel).
    private var sentMayHaveArrived: Bool { acknowledged >= retransmittedUpTo }

    var retransmittedBytes = 0
    var outOfOrderSegments = 0
    var lossBytes = 0
    var lossHoles = 0
    var deliveredBytes = 0

    /// Starts the stream at a SYN whose sequence number is `synSequence`.
    mutating func startAtSYN(_ synSequence: UInt32) {
        guard !started else { return }
        started = true
        base = synSequence &+ 1
    }

    /// Starts the stream mid-way, at the first segment seen.
    mutating func startMidStream(_ sequence: UInt32) {
        guard !started else { return }
        started = true
        base = sequence
    }

    /// The offset of a sequence number, unwrapped next to the expected offset.
    func offset(of sequence: UInt32) -> Int64 {
        let expected = base &+ UInt32(truncatingIfNeeded: next)
        return next + Int64(Int32(bitPattern: sequence &- expected))
    }

    /// Adds one segment's payload (starting at `sequence`) and optional FIN; reports whatever
    /// becomes contiguous. Returns true when the FIN was reached.
    mutating func add(sequence: UInt32, payload: UnsafeRawBufferPointer, fin: Bool, _ deliver: Deliver) throws -> Bool {
        guard started else { return false }
        let start = offset(of: sequence)
        let end = start + Int64(payload.count)
        if fin, finOffset == nil { finOffset = end }
        if payload.count > 0 {
            if end <= next {
                retransmittedBytes += payload.count
                retransmittedUpTo = max(retransmittedUpTo, end)
            } else if start <= next {
                let skip = Int(next - start)
                retransmittedBytes += skip
                if skip > 0 { retransmittedUpTo = max(retransmittedUpTo, next) }
                try emit(Array(payload[skip...]), deliver)
                try drain(deliver)
            } else {
                hold(start: start, bytes: Array(payload))
                try releaseAcknowledged(deliver)
                if heldBytes > Self.maximumHeldBytes { try skipHole(deliver) }
            }
        }
        return try reachedFIN()
    }

    /// Notes that the other side acknowledged `sequence`: holes below it are capture loss.
    mutating func acknowledge(_ sequence: UInt32, _ deliver: Deliver) throws -> Bool {
        guard started else { return false }
        let offset = offset(of: sequence)
        guard offset > acknowledged else { return false }
        acknowledged = offset
        try releaseAcknowledged(deliver)
        return try reachedFIN()
    }

    /// How many of the reported bytes the receiver has acknowledged, when that moved since the last call:
    /// what the receiver's TCP took, in the coordinates of the bytes reported (capture loss left out).
    mutating func takeAcknowledgedBytes() -> Int64? {
        let unacknowledged = max(0, next - acknowledged)
        let covered = max(0, Int64(deliveredBytes) - unacknowledged)
        guard covered > acknowledgedReported else { return nil }
        acknowledgedReported = covered
        return covered
    }

    /// Every reported byte, when not all were handed out as acknowledged yet: the sender reset the
    /// flow, and what it sent travelled ahead of its RST (the receiver's kernel keeps it readable). Not while a
    /// retransmission waits for its acknowledgement: then the receiver took what it acknowledged.
    mutating func takeAllAsAcknowledged() -> Int64? {
        guard sentMayHaveArrived else { return takeAcknowledgedBytes() }
        let covered = Int64(deliveredBytes)
        guard covered > acknowledgedReported else { return nil }
        acknowledgedReported = covered
        return covered
    }

    /// Every reported byte, when the receiver has not acknowledged them all: its reset (with no FIN of its own first)
    /// ends the flow, and what went out to it ahead of the RST its application may have read (see
    /// ``FlowEvent/acknowledgementsCut(towardServer:bytes:time:)``). None while a retransmission waits for its
    /// acknowledgement: the RST answered bytes that reached a socket it had closed.
    var unacknowledgedDelivered: Int64? {
        guard sentMayHaveArrived else { return nil }
        let covered = Int64(deliveredBytes)
        return covered > acknowledgedReported ? covered : nil
    }

    /// Holes the receiver acknowledged were carried by the network but not captured.
    private mutating func releaseAcknowledged(_ deliver: Deliver) throws {
        while let first = held.first, first.start <= acknowledged, first.start > next {
            try skipHole(deliver)
        }
        // The receiver acknowledged the FIN itself: every byte before it arrived.
        if held.isEmpty, let finOffset, acknowledged > finOffset, next < finOffset {
            lossBytes += Int(finOffset - next)
            lossHoles += 1
            next = finOffset
        }
    }

    /// The flow ended (RST or end of capture): every hole left is capture loss, every held byte is
    /// reported. Returns true when a FIN was reached.
    mutating func finish(_ deliver: Deliver) throws -> Bool {
        guard started else { return false }
        while !held.isEmpty { try skipHole(deliver) }
        if let finOffset, finOffset > next, !finReported {
            lossBytes += Int(finOffset - next)
            lossHoles += 1
            next = finOffset
        }
        return try reachedFIN()
    }

    private mutating func reachedFIN() throws -> Bool {
        guard let finOffset, !finReported, next >= finOffset else { return false }
        finReported = true
        return true
    }

    private mutating func emit(_ bytes: [UInt8], _ deliver: Deliver) throws {
        next += Int64(bytes.count)
        deliveredBytes += bytes.count
        try deliver(bytes, lossBytes)
    }

    /// Reports held segments that have become contiguous.
    private mutating func drain(_ deliver: Deliver) throws {
        while let first = held.first, first.start <= next {
            held.removeFirst()
            heldBytes -= first.bytes.count
            let end = first.start + Int64(first.bytes.count)
            if end <= next {
                retransmittedBytes += first.bytes.count
            } else {
                let skip = Int(next - first.start)
                retransmittedBytes += skip
                try emit(skip == 0 ? first.bytes : Array(first.bytes[skip...]), deliver)
            }
        }
    }

    /// Gives up the hole before the first held segment as capture loss and reports what follows.
    private mutating func skipHole(_ deliver: Deliver) throws {
        guard let first = held.first else { return }
        if first.start > next {
            lossBytes += Int(first.start - next)
            lossHoles += 1
            next = first.start
        }
        try drain(deliver)
    }

    private mutating func hold(start: Int64, bytes: [UInt8]) {
        // Binary search for the insertion point; equal starts keep the longer copy.
        var low = 0
        var high = held.count
        while low < high {
            let middle = (low + high) / 2
            if held[middle].start < start { low = middle + 1 } else { high = middle }
        }
        if low < held.count, held[low].start == start {
            let kept = held[low].bytes.count
            retransmittedBytes += min(kept, bytes.count)
            if bytes.count > kept {
                held[low].bytes = bytes
                heldBytes += bytes.count - kept
            }
            return
        }
        outOfOrderSegments += 1
        held.insert((start, bytes), at: low)
        heldBytes += bytes.count
    }
}
