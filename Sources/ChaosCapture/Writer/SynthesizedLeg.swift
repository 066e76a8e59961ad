/// One TCP connection as the capture writer invents it: who dialled whom and the next sequence
/// number of each direction. The "peer" is the party outside the proxy (the client on the client
/// leg, the server on the server leg); the "proxy end" is the proxy's socket on that leg.
struct SynthesizedLeg {
    /// The outside party's address.
    let peer: IPEndpoint
    /// The proxy's address on this leg.
    let proxyEnd: IPEndpoint
    /// Whether the peer sent the SYN (true on the client leg).
    let peerDialled: Bool
    /// Next sequence number the peer will send.
    var peerNext: UInt32
    /// Next sequence number the proxy end will send.
    var proxyNext: UInt32
    /// What the peer has acknowledged of the proxy end's bytes: the ACK number of every segment the
    /// peer sends. It moves only with the relay's `acknowledged` events, so a reader of the file sees
    /// what the peer's TCP really took (the proxy end acknowledges what it reads at once).
    var peerAcknowledges: UInt32 = 0
    /// The sequence number of the proxy end's first data byte.
    var proxyDataStart: UInt32 = 0
    /// The sequence number of the peer's first data byte.
    var peerDataStart: UInt32 = 0
    /// The proxy end's FIN waits until it has sent this many bytes: the relay passes a FIN on behind the bytes it still
    /// holds for this leg (a partition's, a slow reader's), and writes them after the FIN came from the other leg.
    var proxyFinDue: UInt32?
    /// The peer sent its FIN.
    var peerFinished = false
    /// The proxy end sent its FIN.
    var proxyFinished = false
    /// The leg was reset: nothing more is written for it.
    var reset = false

    /// Whether nothing more can happen on this leg: reset, or both FINs sent and the peer has
    /// acknowledged every byte the proxy end sent (its ACKs can follow the FINs).
    var isOver: Bool { reset || (isFinished && peerAcknowledges == proxyNext &- 1) }
    /// Both ends sent their FIN.
    var isFinished: Bool { peerFinished && proxyFinished }
    /// The data bytes the peer has sent.
    var peerSentBytes: UInt32 { (peerNext &- peerDataStart) &- (peerFinished ? 1 : 0) }
    /// The data bytes the proxy end has sent.
    var proxySentBytes: UInt32 { (proxyNext &- proxyDataStart) &- (proxyFinished ? 1 : 0) }
    /// The proxy end's FIN waits and the bytes it waits for have been sent.
    var proxyFinIsDue: Bool {
        guard let due = proxyFinDue, !proxyFinished, !reset else { return false }
        return Int32(bitPattern: proxySentBytes &- due) >= 0
    }

    init(peer: IPEndpoint, proxyEnd: IPEndpoint, peerDialled: Bool, seed: UInt64) {
        let isIPv6 = peer.isIPv6 || proxyEnd.isIPv6
        self.peer = peer.widened(toIPv6: isIPv6)
        self.proxyEnd = proxyEnd.widened(toIPv6: isIPv6)
        self.peerDialled = peerDialled
        // Initial sequence numbers: a stable mix of the connection id, not a random draw.
        var mixed = seed &* 0x9E37_79B9_7F4A_7C15
        mixed ^= mixed >> 29
        peerNext = UInt32(truncatingIfNeeded: mixed)
        proxyNext = UInt32(truncatingIfNeeded: mixed >> 32)
    }
}

/// A segment to write: who sends it and what it carries.
struct PlannedSegment {
    var fromPeer: Bool
    var flags: TCPFlags
    var sequence: UInt32
    var acknowledgement: UInt32
    /// Range of the event's payload this segment carries.
    var payload: Range<Int>
}

extension SynthesizedLeg {
    /// The three packets of the handshake; sequence numbers advance past the SYNs.
    mutating func handshake() -> [PlannedSegment] {
        let dialler = peerDialled
        let diallerISN = dialler ? peerNext : proxyNext
        let acceptorISN = dialler ? proxyNext : peerNext
        peerNext &+= 1
        proxyNext &+= 1
        proxyDataStart = proxyNext
        peerDataStart = peerNext
        peerAcknowledges = proxyNext
        return [
            PlannedSegment(fromPeer: dialler, flags: .syn, sequence: diallerISN, acknowledgement: 0, payload: 0..<0),
            PlannedSegment(
                fromPeer: !dialler,
                flags: [.syn, .ack],
                sequence: acceptorISN,
                acknowledgement: diallerISN &+ 1,
                payload: 0..<0
            ),
            PlannedSegment(
                fromPeer: dialler,
                flags: .ack,
                sequence: diallerISN &+ 1,
                acknowledgement: acceptorISN &+ 1,
                payload: 0..<0
            ),
        ]
    }

    /// Data segments of at most `PacketBuilder.maximumPayload` bytes each; for the peer's bytes, then
    /// the proxy end's ACK (the peer's ACK of the proxy end's bytes comes with ``acknowledge(upTo:)``).
    mutating func data(fromPeer: Bool, count: Int) -> [PlannedSegment] {
        guard !reset, count > 0, !(fromPeer ? peerFinished : proxyFinished) else { return [] }
        var segments: [PlannedSegment] = []
        segments.reserveCapacity(count / PacketBuilder.maximumPayload + 2)
        var start = 0
        while start < count {
            let end = min(count, start + PacketBuilder.maximumPayload)
            let sequence = fromPeer ? peerNext : proxyNext
            let acknowledgement = fromPeer ? peerAcknowledges : peerNext
            segments.append(
                PlannedSegment(
                    fromPeer: fromPeer,
                    flags: end == count ? [.ack, .psh] : .ack,
                    sequence: sequence,
                    acknowledgement: acknowledgement,
                    payload: start..<end
                )
            )
            if fromPeer { peerNext &+= UInt32(end - start) } else { proxyNext &+= UInt32(end - start) }
            start = end
        }
        if fromPeer { segments.append(proxyAcknowledgement()) }
        return segments
    }

    /// The peer's ACK of the proxy end's first `bytes` bytes, when that moves what it acknowledged.
    mutating func acknowledge(upTo bytes: Int64) -> [PlannedSegment] {
        let number = proxyDataStart &+ UInt32(truncatingIfNeeded: bytes)
        guard !reset, Int32(bitPattern: number &- peerAcknowledges) > 0 else { return [] }
        peerAcknowledges = number
        return [PlannedSegment(fromPeer: true, flags: .ack, sequence: peerNext, acknowledgement: number, payload: 0..<0)]
    }

    /// FIN from one end (and, for the peer's, the proxy end's ACK of it).
    mutating func finish(fromPeer: Bool) -> [PlannedSegment] {
        guard !reset, !(fromPeer ? peerFinished : proxyFinished) else { return [] }
        let fin = PlannedSegment(
            fromPeer: fromPeer,
            flags: [.fin, .ack],
            sequence: fromPeer ? peerNext : proxyNext,
            acknowledgement: fromPeer ? peerAcknowledges : peerNext,
            payload: 0..<0
        )
        if fromPeer {
            peerNext &+= 1
            peerFinished = true
        } else {
            proxyNext &+= 1
            proxyFinished = true
            proxyFinDue = nil
            return [fin]
        }
        return [fin, proxyAcknowledgement()]
    }

    /// RST from one end; the leg is over.
    mutating func abort(fromPeer: Bool) -> [PlannedSegment] {
        guard !reset else { return [] }
        reset = true
        return [
            PlannedSegment(
                fromPeer: fromPeer,
                flags: [.rst, .ack],
                sequence: fromPeer ? peerNext : proxyNext,
                acknowledgement: fromPeer ? peerAcknowledges : peerNext,
                payload: 0..<0
            )
        ]
    }

    /// The proxy end's ACK of everything the peer sent.
    private func proxyAcknowledgement() -> PlannedSegment {
        PlannedSegment(fromPeer: false, flags: .ack, sequence: proxyNext, acknowledgement: peerNext, payload: 0..<0)
    }
}
