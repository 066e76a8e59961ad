import ChaosCore

/// A copy of a seq that falls into doubt while another connection's copy of it stands.
///
/// A connection's copy of a seq falls into doubt when its consumer may never have read it: the connection ended
/// abortively past the consumer's last ack, or the consumer ended the call or left the connection that carried it. The
/// seq then becomes unconfirmed, unless another connection has delivered it too (its producer resent it on a new
/// connection, after a resume point below it): that copy stands and the seq stays delivered. The redelivery counted
/// when that copy came, while the doubtful one still stood, is withdrawn: the consumer may never have read the doubtful
/// one, and had the doubt been seen first (the order a capture, or a less loaded machine, shows), the resend would
/// have been the first delivery. (s65's loop: an RPC server's kernel reset its old connection 60 ms after the resends
/// of 104-108 were delivered on the new one; live they were counted redelivered, then taken from the delivered seqs by
/// the reset, denied by the resume ack and lost; the run's tcpdump, which saw the reset first, had them ok once.)
extension StreamLedger {
    /// The most runs of seqs ``redeliveredSeqs`` holds; past it, further redeliveries are counted and never withdrawn.
    static let redeliveredLimit = 4096

    /// `seq`'s copy on one connection fell into doubt; `others` are the stream's states on the other connections still
    /// known. Returns whether one of them delivered `seq` (it stays delivered); if so, a redelivery counted for it is
    /// withdrawn and `withdrawn` hears of it (for the anomaly list).
    func copyInDoubt(_ seq: Int64, others: [ConnectionStream], withdrawn: (Int64) -> Void) -> Bool {
        guard others.contains(where: { $0.deliveredHere.contains(seq) }) else { return false }
        if redeliveredSeqs.remove(seq) {
            counts.redelivered -= 1
            withdrawn(seq)
        }
        return true
    }

    /// A copy of `seq` came while an earlier one stood: counted redelivered, and remembered so that it can be withdrawn.
    func countRedelivered(_ seq: Int64) {
        counts.redelivered += 1
        if redeliveredSeqs.intervals.count < Self.redeliveredLimit { redeliveredSeqs.insert(seq) }
    }
}
