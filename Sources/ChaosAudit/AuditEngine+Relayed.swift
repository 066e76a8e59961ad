import ChaosCore
import ChaosProtocols

/// A read and the write of its very buffer at the same offset, audited in one pass (framings whose proxy writes only
/// the bytes it read, ``ProtocolFramer/proxyWritesOnlyRelayedBytes``): the bytes the consumer was handed are the
/// bytes the producer sent, so each message is framed and its fields read once, and counted as sent and as written at
/// once; a protocol event is taken as read and as written. The delivered pipe's decoder is skipped while a direction
/// stays in this lockstep and takes the sent pipe's state when it leaves it (a read not written whole, a close, a
/// protocol problem), so whatever follows is decoded as it would have been.
extension AuditEngine {
    /// Audits `held` (a read) and `event` together when `event` writes the read's buffer at the offset it was read
    /// at; false (nothing done) otherwise.
    func relayed(_ held: TrafficEvent, _ event: TrafficEvent) -> Bool {
        guard event.connection == held.connection, case .read(let side, let bytes) = held.kind,
            case .written(let target, let written) = event.kind, target == side.other, written.count == bytes.count,
            Self.sameBuffer(bytes, written)
        else { return false }
        let connection = state(of: held.connection)
        let direction = side.producing
        let slot = direction == .upstream ? 0 : 1
        let sent = connection.pipe(.sent, direction)
        let delivered = connection.pipe(.delivered, direction)
        guard sent.offset == delivered.offset else { return false }
        if !connection.lockstep[slot] {
            guard sent.decoder.canHandOverState, delivered.decoder.canHandOverState else { return false }
            connection.lockstep[slot] = true
        }
        let start = sent.offset
        sent.offset += Int64(bytes.count)
        delivered.offset = sent.offset
        var stepped = true
        bytes.withUnsafeBufferPointer { buffer in
            sent.decoder.decode(buffer) { output in
                switch output {
                case .message(let body, let end, _, let stream):
                    self.auditRelayed(
                        body,
                        stream: stream,
                        endingAt: start + Int64(end),
                        sent: sent,
                        delivered: delivered,
                        connection: connection,
                        read: held.time,
                        written: event.time
                    )
                case .event(let found, let at):
                    // As the two copies' decoders would have said it: the read's, then the write's.
                    self.protocolEvent(found, at: start + Int64(at), pipe: sent, connection: connection, time: held.time)
                    self.protocolEvent(found, at: start + Int64(at), pipe: delivered, connection: connection, time: event.time)
                case .problem(.framing(let problem), _):
                    // Both copies stop fitting the framing here; the delivered decoder takes the stopped state below.
                    self.framingProblem(problem, pipe: sent, connection: connection, time: held.time)
                    self.framingProblem(problem, pipe: delivered, connection: connection, time: event.time)
                    stepped = false
                case .problem(.protocolError(let reason), let at):
                    self.protocolProblem(reason, at: start + Int64(at), pipe: sent, connection: connection, time: held.time)
                    self.protocolProblem(reason, at: start + Int64(at), pipe: delivered, connection: connection, time: event.time)
                    stepped = false
                case .callMessage:
                    // No framing with calls audits in lockstep (its proxy writes frames of its own).
                    stepped = false
                case .callEnded(let call, _):
                    self.callEnded(call, by: direction.producer, of: connection)
                    stepped = false
                }
            }
        }
        if !stepped { leaveLockstep(connection, direction) }
        return true
    }

    /// Ends `direction`'s lockstep: the delivered pipe's decoder takes the state of the sent pipe's, which decoded the
    /// same bytes at the same offsets.
    func leaveLockstep(_ connection: ConnectionState, _ direction: Direction) {
        let slot = direction == .upstream ? 0 : 1
        guard connection.lockstep[slot] else { return }
        connection.lockstep[slot] = false
        _ = connection.pipe(.delivered, direction).decoder.adoptState(of: connection.pipe(.sent, direction).decoder)
    }

    /// One message of a relayed pair: what ``audit(_:endingAt:pipe:connection:time:call:stream:)`` does for its read copy
    /// and then for its written copy, with its fields read once.
    @inline(__always)
    private func auditRelayed(
        _ frame: UnsafeBufferPointer<UInt8>,
        stream named: UnsafeBufferPointer<UInt8>?,
        endingAt end: Int64,
        sent: FramePipe,
        delivered: FramePipe,
        connection: ConnectionState,
        read readTime: Int64,
        written writtenTime: Int64
    ) {
        let slot = sent.direction == .upstream ? 0 : 1
        let retained = sent.retained
        if retained { sent.retained = false }
        var fields = extract(frame, slot: slot)
        if let named { fields.stream = named }
        let byHandshake = slot == 0 ? namesStreamByHandshake.upstream : namesStreamByHandshake.downstream
        func connectionStream(_ pipe: FramePipe) -> ConnectionStream {
            byHandshake
                ? stream(named: connection.handshakeStreams[slot]?[...], pipe: pipe, connection: connection)
                : stream(fields, pipe: pipe, connection: connection)
        }
        guard fanoutAttributes(fields, sent.direction, connection, read: true) else { return }
        if fields.undecodable {
            undecodable(frame, pipe: sent, connection: connection, time: readTime)
            undecodable(frame, pipe: delivered, connection: connection, time: writtenTime)
            return
        }
        if let resume = fields.resume, sent.direction == .upstream { fanoutResumed(resume, on: connection) }
        if fields.ignored {
            messageStats.ignored += 2
        } else if fields.seq == nil, fields.ack == nil {
            messageStats.unsequenced += 2
            sampleUnsequenced(frame, endingAt: end, direction: sent.direction, connection: connection.id)
        }
        if let ack = fields.ack { stated(ack, on: connectionStream(sent).ledger, connection: connection.id) }
        guard let seq = fields.ignored ? nil : fields.seq else {
            if let ack = fields.ack {
                written(
                    seq: nil,
                    ack: ack,
                    connectionStream(delivered),
                    endingAt: end,
                    pipe: delivered,
                    connection: connection,
                    time: writtenTime
                )
            }
            return
        }
        let connectionStream = connectionStream(sent)
        fanoutSender(connectionStream, sent.direction, connection)
        if let contract = sent.contract { connectionStream.ledger.carried(contract) }
        if retained { connectionStream.retainedInFlight.insert(seq) }
        if isPlausible(seq, connectionStream.ledger, pipe: sent, connection: connection, time: readTime) {
            self.sent(seq, connectionStream, time: readTime)
            if pathLimits?.radioTail != nil { pathTracker.message(on: connection.id, at: readTime) }
        }
        writtenCopy(seq: seq, ack: fields.ack, connectionStream, endingAt: end, pipe: delivered, connection: connection, time: writtenTime)
    }

    /// The fields of a message of direction `slot` (upstream 0, downstream 1), read by that direction's extractor.
    @inline(__always)
    func extract(_ frame: UnsafeBufferPointer<UInt8>, slot: Int) -> MessageFields {
        (slot == 0 ? upstreamExtractor : downstreamExtractor).unsafelyUnwrapped.extract(frame)
    }

    /// Whether two arrays share one buffer (the relay handed the read's own array over as the write's).
    @inline(__always)
    static func sameBuffer(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBufferPointer { a in b.withUnsafeBufferPointer { a.baseAddress == $0.baseAddress } }
    }
}
