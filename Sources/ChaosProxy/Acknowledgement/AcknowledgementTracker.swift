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

    /// A tracker for a leg the proxy dialled (`dialled`, the server leg) or accepted (the client leg).
    init(dialled: Bool) { base = dialled ? 1 : 0 }

    /// Whether bytes were written that the peer has not taken yet.
    var isOutstanding: Bool { acknowledged < written }

    /// Counts `count` more bytes handed to the socket.
    mutating func wrote(_ count: Int) { written += Int64(count) }

    /// Takes the kernel's `tcpi_bytes_acked` (and, when the proxy is about to reset the leg, its
    /// `tcpi_notsent_bytes`); returns the new offset when it moved.
    mutating func update(kernelBytesAcked: UInt64, notSentBeforeReset notSent: UInt32? = nil) -> Int64? {
        var covered = min(kernelBytesAcked > base ? Int64(clamping: kernelBytesAcked - base) : 0, written)
        if let notSent { covered = max(covered, written - Int64(notSent)) }
        guard covered > acknowledged else { return nil }
        acknowledged = covered
        return covered
    }

    /// Reads socket `fd`'s acknowledgements (`beforeReset`: the proxy is about to reset it): the new
    /// offset when it moved, and whether more may come (false once the connection is over or the
    /// socket cannot say).
    mutating func poll(fd: Int32, beforeReset: Bool = false) -> (moved: Int64?, more: Bool) {
        guard isOutstanding else { return (nil, false) }
        var kernel: UInt64 = 0
        var notSent: UInt32 = 0
        let state = chaos_tcp_bytes_acked(fd, &kernel, &notSent)
        guard state >= 0 else { return (nil, false) }
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
