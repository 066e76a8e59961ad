import CChaosEpoll

/// How much of what a relay wrote to one leg the peer's TCP has taken: the audit counts a message as
/// delivered only once its last byte is taken. Bytes flushed into a connection the peer already
/// abandoned are answered with a reset, never acknowledged, so they are not delivered.
///
/// Taken means acknowledged while the connection lives. When the proxy itself resets a leg (a fault,
/// a reset passed on, the proxy stopping), every byte its TCP had already sent counts as taken: those
/// bytes travel ahead of the RST, and the peer's kernel keeps them readable after it (its ACK may
/// only have been waiting for a reply to ride on). What was still unsent is thrown away with the RST.
///
/// The kernel's `tcpi_bytes_acked` counts a SYN the socket sent and a FIN once acknowledged, so the
/// tracker takes the SYN off (`dialled`) and never reports more than was written.
struct AcknowledgementTracker: Sendable {
    /// What the kernel counts before the first byte: 1 for a leg the proxy dialled (its SYN).
    private let base: UInt64
    /// Bytes handed to the socket so far.
    private(set) var written: Int64 = 0
    /// Bytes known taken and reported so far.
    private(set) var acknowledged: Int64 = 0
    /// Bytes the kernel is known to have sent: its count of bytes sent at least once, or (on a kernel without it)
    /// what it had written less what it still held unsent when last read on a live connection.
    private(set) var sent: Int64 = 0
    /// Whether a dead path in the kernel drops what the proxy sends on this leg now.
    private var inDeadPath = false
    /// The bytes written up to the end of the last dead path in the kernel on this leg: what went out of them and was
    /// not acknowledged then was dropped, and waits in the backoff of its retransmission.
    private var deadPathUpTo: Int64 = 0

    /// Whether what went out and was never seen acknowledged may have reached the peer (the kernel's sent counts say
    /// so): not while a dead path in the kernel drops this leg's segments, nor after one until the peer acknowledged
    /// every byte written before it ended. Those bytes went into the path's drops and then into the retransmission
    /// backoff, so a reset (the proxy's, or the peer's answer to a retransmission reaching a socket it had closed)
    /// does not follow them: the peer took only what it acknowledged.
    private var sentMayHaveArrived: Bool { !inDeadPath && acknowledged >= deadPathUpTo }

    /// A tracker for a leg the proxy dialled (`dialled`, the server leg) or accepted (the client leg).
    init(dialled: Bool) { base = dialled ? 1 : 0 }

    /// A dead path in the kernel began (`dead`) or ended on this leg's way out.
    mutating func deadPath(_ dead: Bool) {
        if !dead, inDeadPath { deadPathUpTo = written }
        inDeadPath = dead
    }

    /// Whether bytes were written that the peer has not taken yet.
    var isOutstanding: Bool { acknowledged < written }

    /// Counts `count` more bytes handed to the socket.
    mutating func wrote(_ count: Int) { written += Int64(count) }

    /// Takes the kernel's `tcpi_bytes_acked` (and, when the proxy is about to reset the leg, its
    /// `tcpi_notsent_bytes`); returns the new offset when it moved.
    mutating func update(kernelBytesAcked: UInt64, notSentBeforeReset notSent: UInt32? = nil) -> Int64? {
        if let notSent { sawUnsent(notSent) }
        var covered = min(kernelBytesAcked > base ? Int64(clamping: kernelBytesAcked - base) : 0, written)
        if let notSent, sentMayHaveArrived { covered = max(covered, written - Int64(notSent)) }
        guard covered > acknowledged else { return nil }
        acknowledged = covered
        return covered
    }

    /// The kernel of a live connection still held `notSent` of the bytes written: the rest went out.
    mutating func sawUnsent(_ notSent: UInt32) { sent = max(sent, written - Int64(notSent)) }

    /// The kernel sent `sentOnce` payload bytes at least once (`tcpi_bytes_sent` less `tcpi_bytes_retrans`, which
    /// outlive a reset; 0 where the kernel does not say).
    mutating func sawSent(_ sentOnce: UInt64) { sent = max(sent, min(written, Int64(clamping: sentOnce))) }

    /// The offset up to which bytes went out to the peer and were never seen acknowledged, for a leg its peer reset
    /// (without a FIN first): its kernel took them, ahead of its RST, and its application may have read them (a
    /// consumer's ACK waits up to 40 ms for a reply to ride on, and one that then closes its socket with later bytes
    /// unread answers with a RST, whose acknowledgement number no TCP counts). Nil when there are none.
    /// None after a dead path in the kernel whose drops the peer has not all acknowledged since (``deadPath(_:)``).
    var sentUnacknowledged: Int64? { sent > acknowledged && sentMayHaveArrived ? sent : nil }

    /// Reads socket `fd`'s acknowledgements (`beforeReset`: the proxy is about to reset it): the new
    /// offset when it moved, and whether more may come (false once the connection is over or the
    /// socket cannot say).
    mutating func poll(fd: Int32, beforeReset: Bool = false) -> (moved: Int64?, more: Bool) {
        guard isOutstanding else { return (nil, false) }
        var kernel: UInt64 = 0
        var notSent: UInt32 = 0
        var sentOnce: UInt64 = 0
        let state = chaos_tcp_bytes_acked(fd, &kernel, &notSent, &sentOnce)
        guard state >= 0 else { return (nil, false) }
        if state == 0 { sawUnsent(notSent) }
        sawSent(sentOnce)
        // A connection already over was reset by the peer: what it did not acknowledge, it refused.
        let moved = update(kernelBytesAcked: kernel, notSentBeforeReset: beforeReset && state == 0 ? notSent : nil)
        return (moved, state == 0 && isOutstanding)
    }

    /// How often a leg with bytes outstanding is polled at first, in nanoseconds.
    static let pollInterval: Int64 = 1_000_000

    /// The wait before the next poll of a leg whose bytes are still outstanding after `polls` polls since the last
    /// write: 1 ms twice, then 2, 4, 8 and at most 16 ms. A peer that delays its ACK for a reply (up to 40 ms on Linux)
    /// costs a handful of polls, not forty; its acknowledgement is seen at most 16 ms late.
    static func pollDelay(afterPolls polls: Int) -> Int64 {
        pollInterval << Int64(min(max(polls - 1, 0), 4))
    }
    /// How long a relay that is about to close a leg with a FIN waits for its peer to acknowledge
    /// what it still holds, at most, in nanoseconds.
    static let closeWait: Int64 = 1_000_000_000
}
