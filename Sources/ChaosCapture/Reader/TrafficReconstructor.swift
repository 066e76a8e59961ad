import ChaosCore
import ChaosTLSDecryption

/// Turns decoded TCP segments into the `TrafficEvent` stream: finds flows, decides client and
/// server, reassembles each direction, pairs proxy legs, and queues events in `outbox`.
final class TrafficReconstructor {
    let options: CaptureReadOptions
    var statistics = CaptureStatistics()
    /// Events ready for the consumer, in order.
    var outbox: [TrafficEvent] = []
    var flows: [FlowKey: TCPFlow] = [:]
    /// Possible client legs waiting for a server leg, oldest first.
    var pendingClientLegs: [TCPFlow] = []
    /// Server legs with several possible client legs, waiting for their payload to tell, oldest first.
    var pendingServerLegs: [PendingServerLeg] = []
    /// The order of the next event held by a pending flow.
    var nextHeldOrder = 0
    var nextConnection: ConnectionID = 1
    /// Per connection of two paired legs, until both peers sent FIN (or a leg was reset): which peers did, and which
    /// legs the proxy closed on its own (``LegEnds``).
    var legEnds: [ConnectionID: LegEnds] = [:]
    /// The QUIC connections of the capture (with a key log), once a UDP datagram came.
    var quic: QUICCaptureFlows?
    private var nextSerial = 0
    private var packetsSincePrune = 0

    init(options: CaptureReadOptions) {
        self.options = options
    }

    /// Handles one segment seen at `time` (nanoseconds since the first packet).
    func consume(_ segment: DecodedSegment, time: Int64) throws {
        statistics.tcpSegments += 1
        if segment.missingPayload > 0 { statistics.truncatedPackets += 1 }
        try expirePendingLegs(at: time)
        let flags = segment.flags
        let isOpeningSYN = flags.contains(.syn) && !flags.contains(.ack)
        let key = FlowKey(segment.source, segment.destination)
        var flow = flows[key]
        if let existing = flow, isOpeningSYN, existing.finished || existing.synSequence != segment.sequence {
            try end(existing)
            if existing.isPending, !pendingServerLegs.isEmpty { try settleServerLegs(time: time) }
            flows[key] = nil
            existing.count(into: &statistics)
            flow = nil
        }
        if flow == nil {
            guard let created = try startFlow(segment, key: key, time: time) else { return }
            flow = created
        }
        guard let flow else { return }
        flow.lastTime = time
        if flow.finished {
            // A side resets after the FINs: the one that answered the other's FIN closed its socket with bytes unread
            // (a peer answering a proxy's FIN cut so, whose reset the live relay records after the cut), or the one
            // that closed first answers bytes that came after its close (a server that gave up behind a partition
            // while the proxy held bytes for it; a proxy's own capture shows the proxy's FIN as soon as the other side's
            // came, and the live relay records that reset after the server's FIN).
            if segment.flags.contains(.rst), !flow.wasReset, flow.firstFINFromClient != nil {
                flow.wasReset = true
                return try report(.reset(fromClient: segment.source == flow.client, time: time), of: flow)
            }
            statistics.retransmittedBytes += segment.payload.count
            // Closed both ways, a receiver still acknowledges the last bytes (its ACK can follow the FINs).
            if !flow.wasReset, segment.flags.contains(.ack) { try acknowledge(segment, on: flow, time: time) }
            return
        }
        let wasPending = flow.isPending
        try apply(segment, to: flow, time: time)
        if wasPending, !pendingServerLegs.isEmpty { try settleServerLegs(time: time) }
        if flow.finished, flow.isPending, !isClaimed(flow) { try resolveUnpaired(flow, time: time) }
        packetsSincePrune += 1
        if packetsSincePrune >= 65_536 { prune(at: time) }
    }

    /// The end of the capture: every flow is flushed and every waiting leg resolved.
    func finish() throws {
        let remaining = flows.values.sorted { $0.serial < $1.serial }
        for flow in remaining where !flow.finished {
            try end(flow)
        }
        try settleServerLegs(time: .max, force: true)
        for flow in pendingClientLegs {
            try resolveUnpaired(flow, time: flow.lastTime)
        }
        pendingClientLegs.removeAll()
        for flow in remaining { flow.count(into: &statistics) }
        flows.removeAll()
        finishQUIC()
    }

    private func startFlow(_ segment: DecodedSegment, key: FlowKey, time: Int64) throws -> TCPFlow? {
        let flags = segment.flags
        let client: WireEndpoint
        let server: WireEndpoint
        var opened = false
        var synSequence: UInt32?
        if flags.contains(.syn), !flags.contains(.ack) {
            (client, server, opened, synSequence) = (segment.source, segment.destination, true, segment.sequence)
        } else if flags.contains(.syn) {
            (client, server) = (segment.destination, segment.source)
            synSequence = segment.acknowledgement &- 1
        } else if !segment.payload.isEmpty {
            (client, server) = guessRoles(segment.source, segment.destination)
        } else {
            return nil  // a bare ACK, FIN or RST of a flow the capture did not see begin
        }
        let flow = TCPFlow(
            serial: nextSerial,
            client: client,
            server: server,
            openedWithSYN: opened,
            synSequence: synSequence,
            time: time
        )
        nextSerial += 1
        flows[key] = flow
        statistics.flows += 1
        if flags.contains(.syn), flags.contains(.ack) { flow.towardServer.startAtSYN(segment.acknowledgement &- 1) }
        try assignRole(flow, time: time)
        return flow
    }

    /// Client and server of a flow whose SYN is not in the capture: the configured server or proxy
    /// port, else the lower port.
    private func guessRoles(_ source: WireEndpoint, _ destination: WireEndpoint) -> (WireEndpoint, WireEndpoint) {
        var known: Set<UInt16> = []
        if let port = options.serverPort { known.insert(port) }
        if case .proxyPort(let port) = options.pairing { known.insert(port) }
        if known.contains(source.port), !known.contains(destination.port) { return (destination, source) }
        if known.contains(destination.port) { return (source, destination) }
        return source.port < destination.port ? (destination, source) : (source, destination)
    }

    private func apply(_ segment: DecodedSegment, to flow: TCPFlow, time: Int64) throws {
        let flags = segment.flags
        let fromClient = segment.source == flow.client
        var sequence = segment.sequence
        if flags.contains(.syn) {
            if fromClient { flow.towardServer.startAtSYN(sequence) } else { flow.towardClient.startAtSYN(sequence) }
            sequence &+= 1
        } else if !segment.payload.isEmpty || flags.contains(.fin) {
            if fromClient { flow.towardServer.startMidStream(sequence) } else { flow.towardClient.startMidStream(sequence) }
        }
        let fin = flags.contains(.fin)
        if fromClient {
            let sent = try flow.towardServer.add(sequence: sequence, payload: segment.payload, fin: fin) { bytes, loss in
                flow.lossBeforeData = loss
                try self.report(.data(towardServer: true, bytes: bytes, time: time), of: flow)
            }
            if sent { try report(.fin(fromClient: true, time: time), of: flow) }
        } else {
            let sent = try flow.towardClient.add(sequence: sequence, payload: segment.payload, fin: fin) { bytes, loss in
                flow.lossBeforeData = loss
                try self.report(.data(towardServer: false, bytes: bytes, time: time), of: flow)
            }
            if sent { try report(.fin(fromClient: false, time: time), of: flow) }
        }
        // A reset's acknowledgement number is no acknowledgement: a receiver that resets with bytes it has not read
        // (a socket closed with unread data) drops them, and a live relay's TCP never counts it either.
        if flags.contains(.ack), !flags.contains(.rst) { try acknowledge(segment, on: flow, time: time) }
        if flags.contains(.rst) {
            try flush(flow, time: time)
            // What the RST's sender sent went ahead of it: its receiver has those bytes.
            let sent = fromClient ? flow.towardServer.takeAllAsAcknowledged() : flow.towardClient.takeAllAsAcknowledged()
            if let sent { try report(.acknowledged(towardServer: fromClient, bytes: sent, time: time), of: flow) }
            // What went to the RST's sender past its last acknowledgement, when it sent no FIN first (a socket closed
            // with later bytes unread; one closed after its FIN answers what reaches it with a RST, and read nothing).
            let toward = fromClient ? flow.towardClient : flow.towardServer
            let ownFIN = fromClient ? flow.towardServer.finReported : flow.towardClient.finReported
            if !ownFIN, let taken = toward.unacknowledgedDelivered {
                try report(.acknowledgementsCut(towardServer: !fromClient, bytes: taken, time: time), of: flow)
            }
            flow.finished = true
            flow.wasReset = true
            try report(.reset(fromClient: fromClient, time: time), of: flow)
        } else if flow.towardServer.finReported, flow.towardClient.finReported {
            flow.finished = true
        }
    }

    /// The segment's ACK: the other direction's receiver took bytes (holes below it were capture loss).
    private func acknowledge(_ segment: DecodedSegment, on flow: TCPFlow, time: Int64) throws {
        let towardServer = segment.source != flow.client
        let reached =
            towardServer
            ? try flow.towardServer.acknowledge(segment.acknowledgement) { bytes, loss in
                flow.lossBeforeData = loss
                try self.report(.data(towardServer: true, bytes: bytes, time: time), of: flow)
            }
            : try flow.towardClient.acknowledge(segment.acknowledgement) { bytes, loss in
                flow.lossBeforeData = loss
                try self.report(.data(towardServer: false, bytes: bytes, time: time), of: flow)
            }
        if reached { try report(.fin(fromClient: towardServer, time: time), of: flow) }
        let taken = towardServer ? flow.towardServer.takeAcknowledgedBytes() : flow.towardClient.takeAcknowledgedBytes()
        if let taken { try report(.acknowledged(towardServer: towardServer, bytes: taken, time: time), of: flow) }
    }

    /// Ends a flow whose last packet has been seen: holes become capture loss.
    private func end(_ flow: TCPFlow) throws {
        try flush(flow, time: flow.lastTime)
        flow.finished = true
    }

    private func flush(_ flow: TCPFlow, time: Int64) throws {
        let clientDone = try flow.towardServer.finish { bytes, loss in
            flow.lossBeforeData = loss
            try self.report(.data(towardServer: true, bytes: bytes, time: time), of: flow)
        }
        if clientDone { try report(.fin(fromClient: true, time: time), of: flow) }
        let serverDone = try flow.towardClient.finish { bytes, loss in
            flow.lossBeforeData = loss
            try self.report(.data(towardServer: false, bytes: bytes, time: time), of: flow)
        }
        if serverDone { try report(.fin(fromClient: false, time: time), of: flow) }
    }

    /// Forgets finished flows idle for a minute, so a long capture's table stays small.
    private func prune(at time: Int64) {
        packetsSincePrune = 0
        for (key, flow) in flows where flow.finished && !flow.isPending && time - flow.lastTime > 60_000_000_000 {
            flow.count(into: &statistics)
            flows[key] = nil
        }
    }
}
