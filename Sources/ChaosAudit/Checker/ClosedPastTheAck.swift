/// What a consumer's closed connections delivered past its last ack there, against the resume point it names next.
///
/// A consumer that closed a connection (its idle timeout, its own FIN) may have dropped what its TCP had taken and its
/// application had not read: nothing in its TCP says so, since it acknowledged the bytes. Its first ack on a newer
/// connection, its resume point, does: the seqs that closed connection delivered above that point, and above the last
/// ack it stated there, are seqs it never had. They are disowned (``StreamLedger/disowned``) until delivered again on
/// that connection or a later one, as a resume the protocol states is (``StreamLedger/resumed(after:on:)``). Only
/// connections already closed on the consumer's side when it names the point: one still open may yet hand its
/// application what it took (``SupersededDeliveries`` judges what it delivers after the move).
extension StreamLedger {
    /// The most closed connections a stream remembers until its consumer's next resume point.
    static let closedPastAckLimit = 16

    /// The consumer closed `stream`'s connection: remembered when that connection delivered past its last ack there,
    /// for a consumer that acknowledges.
    func consumerClosed(_ stream: ConnectionStream) {
        guard ackedUpTo != nil, let highest = stream.deliveredHere.max, highest > (stream.consumerAck ?? .min) else { return }
        if closedPastAck.count == Self.closedPastAckLimit { closedPastAck.removeFirst() }
        closedPastAck.append(stream)
    }

    /// The consumer named `point` as its first ack on the connection `order`: what the closed connections older than it
    /// delivered above `point` (and above their last ack), still counted delivered and delivered by none of the
    /// stream's states on the other connections (`others`, asked once per closed connection with such a seq), is
    /// disowned.
    func resumePointNamed(_ point: Int64, on order: ConnectionOrder, others findOthers: (ConnectionStream) -> [ConnectionStream]) {
        guard !closedPastAck.isEmpty else { return }
        var kept: [ConnectionStream] = []
        var looked: Int64 = 0
        for stream in closedPastAck {
            guard stream.connectionOrder < order else {
                kept.append(stream)
                continue
            }
            let floor = max(point, stream.consumerAck ?? .min)
            var others: [ConnectionStream]?
            for interval in stream.deliveredHere.intervals where interval.upper > floor && looked < Self.abortedLimit {
                for seq in max(interval.lower, floor + 1)...interval.upper {
                    looked += 1
                    guard looked <= Self.abortedLimit else { break }
                    guard deliveredSeqs.contains(seq), !confirmedAfterClose.contains(seq) else { continue }
                    let copies = others ?? findOthers(stream)
                    others = copies
                    if copies.contains(where: { $0.deliveredHere.contains(seq) }) { continue }
                    disowned.insert(seq)
                    resumedOn = max(resumedOn, order)
                }
            }
        }
        closedPastAck = kept
    }
}
