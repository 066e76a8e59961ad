import ChaosCore

/// Backpressure, the orderly close and the relay's deadlines: rules both relays drive through
/// the machine rather than keep themselves.
extension RelayStateMachine {
    /// How long the upstream has to answer before the client is reset, unless the proxy is told
    /// otherwise (``ProxyServer/Options/connectTimeout``).
    static let connectTimeout = ChaosDuration.seconds(Int64(10))
    /// How long a leg's last FIN waits, at most, for its peer to acknowledge what was written to it.
    static let acknowledgementWait = ChaosDuration.nanoseconds(AcknowledgementTracker.closeWait)

    // MARK: backpressure

    /// Whether `side` may be read now: its bytes go nowhere, or its partner takes more.
    func mayRead(_ side: Side) -> Bool {
        guard phase == .relaying, !leg(side).receivedFIN, !leg(side).closed else { return false }
        return leg(side).discardsReads || (!isCut && leg(side.other).accepts)
    }

    /// `side` takes more bytes now (`accepts`), or is full: its socket did not take everything (the
    /// epoll relay), or its channel is not writable or its shaper holds too much (NIO). Its partner
    /// is read only while it accepts; a partner held back is resumed.
    mutating func acceptsChanged(_ side: Side, accepts: Bool) -> [Action] {
        guard leg(side).accepts != accepts else { return [] }
        legs[side.slot].accepts = accepts
        return accepts && mayRead(side.other) ? [.resumeReading(side.other)] : []
    }

    // MARK: the orderly close

    /// Whether a leg's last FIN waits for its peer's acknowledgements (the connection is closing in order).
    var awaitsAcknowledgements: Bool { legs.contains(where: \.awaitsAcknowledgements) }

    /// `side`'s peer acknowledged everything written to it, or ``acknowledgementWait`` passed: its
    /// FIN goes (and, when both legs are done, both close).
    mutating func acknowledgementsSettled(_ side: Side) -> [Action] {
        guard leg(side).awaitsAcknowledgements else { return [] }
        legs[side.slot].awaitsAcknowledgements = false
        guard phase == .relaying, !isCut, !leg(side).closed else { return [] }
        return sendFIN(side)
    }

    /// Our FIN goes to `side`; after the last one of an orderly end, both legs close.
    mutating func sendFIN(_ side: Side) -> [Action] {
        legs[side.slot].sentFIN = true
        var actions: [Action] = [.sendFIN(side)]
        if legs.allSatisfy({ $0.receivedFIN && $0.sentFIN }) { actions.append(.closeInOrder) }
        return actions
    }
}
