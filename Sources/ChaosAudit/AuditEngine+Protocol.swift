import ChaosCore
import ChaosProtocols
import Foundation

extension AuditEngine {
    /// Decodes `bytes` on the connection's leg for (`role`, `direction`) and audits every complete message.
    @inline(__always)
    func feed(_ bytes: [UInt8], role: FramePipe.Role, direction: Direction, connection id: ConnectionID, time: Int64) {
        let connection = state(of: id)
        leaveLockstep(connection, direction)
        let pipe = connection.pipe(role, direction)
        let start = pipe.offset
        pipe.offset += Int64(bytes.count)
        if layer.writtenCopiesRead {
            if role == .sent {
                pipe.verbatim.read(bytes, at: start)
            } else {
                let sent = connection.pipe(.sent, direction)
                pipe.verbatim.written(bytes, at: start, lastRead: sent.verbatim)
                sent.verbatim.forgetRead()
            }
        }
        bytes.withUnsafeBufferPointer { buffer in
            pipe.decoder.decode(buffer) { output in
                switch output {
                case .message(let body, let end, _, let stream):
                    self.audit(body, endingAt: start + Int64(end), pipe: pipe, connection: connection, time: time, stream: stream)
                case .callMessage(let body, let end, let call):
                    self.audit(body, endingAt: start + Int64(end), pipe: pipe, connection: connection, time: time, call: call)
                case .callEnded(let call, _):
                    if role == .sent { self.callEnded(call, by: direction.producer, of: connection) }
                case .event(let event, let at):
                    self.protocolEvent(event, at: start + Int64(at), pipe: pipe, connection: connection, time: time)
                case .problem(.framing(let problem), _):
                    self.framingProblem(problem, pipe: pipe, connection: connection, time: time)
                case .problem(.protocolError(let reason), let at):
                    self.protocolProblem(reason, at: start + Int64(at), pipe: pipe, connection: connection, time: time)
                }
            }
        }
    }

    func framingProblem(_ problem: FrameSplitter.Problem, pipe: FramePipe, connection: ConnectionState, time: Int64) {
        messageStats.framingErrors += 1
        guard !connection.reportedFraming else { return }
        connection.reportedFraming = true
        let what =
            switch problem {
            case .lineTooLong(let length): "no newline in \(length) bytes: the stream is not newline-delimited"
            case .badLength(let length): "length prefix \(length) is not a frame length: the stream is not length-prefixed as declared"
            }
        record(
            .framing,
            pipe.cached?.ledger,
            direction: pipe.direction,
            time: time,
            connection: connection.id,
            detail: "\(what) (\(pipe.where)); the rest of this connection is not audited"
        )
    }

    /// Bytes that do not parse: the leg's decoder stopped; the relay passed them on, the audit goes on elsewhere.
    func protocolProblem(_ reason: String, at offset: Int64, pipe: FramePipe, connection: ConnectionState, time: Int64) {
        guard connection.failedDirections.insert(pipe.direction).inserted else { return }
        protocolStats.protocolErrors += 1
        guard !connection.reportedProtocol else { return }
        connection.reportedProtocol = true
        record(
            .protocolError,
            pipe.cached?.ledger,
            direction: pipe.direction,
            time: time,
            connection: connection.id,
            detail: "\(reason), at byte \(offset) \(pipe.where); the rest of this direction is not audited (reported once per connection)"
        )
    }

    func protocolEvent(
        _ event: ProtocolEvent,
        at offset: Int64,
        pipe: FramePipe,
        connection: ConnectionState,
        time: Int64
    ) {
        // Counted once, as read from the producer (what the peer said); the written copy is the same frame.
        let read = pipe.role == .sent
        switch event {
        case .requestRead:
            guard read else { return }
            let session = connection.session
            for slot in 0..<2 {
                switch handshakeStreamSources[slot] {
                case .header, .query:
                    connection.handshakeStreams[slot] = Self.handshakeValue(handshakeStreamSources[slot], in: session).map { Array($0.utf8) }
                case .field, .rpc, nil: break
                }
            }
            if connection.fanoutReceiver == nil, let name = Self.handshakeValue(spec.fanout?.receiverSource, in: session) {
                receiverJoined(name, on: connection)
            }
        case .closing:
            if read { connection.closingSides.insert(pipe.direction.producer) }
        case .subscribed:
            guard read, let receiver = connection.session.receiver else { return }
            joined(receiver)
        case .contract(let contract):
            // As the producer sent it: the message read next on this leg carries it to its stream.
            if read { pipe.contract = contract }
        case .retained:
            if read { pipe.retained = true }
        case .resumePoint(let point):
            // What the producer holds of the other direction's stream on this connection (named by the handshake).
            let other = pipe.direction == .upstream ? 1 : 0
            guard read, let name = connection.handshakeStreams[other] else { return }
            let direction = pipe.direction.reversed
            let receiver = direction == .downstream ? receiver(of: connection) : nil
            ledger(String(decoding: name, as: UTF8.self), direction, receiver: receiver).resumed(after: point, on: connection.order)
        case .counted(let name):
            if read { protocolStats[counter: name] += 1 }
        case .coded(let family, let code, let proxyMayWrite):
            let slot = pipe.direction == .upstream ? 0 : 1
            if read {
                connection.codesRead[family, default: [0, 0]][slot] += 1
            } else if !proxyMayWrite || connection.matchWrittenCopy(family, slot) {
                return
            }
            protocolStats.count(family, code: code, fault: faults.label?.kind ?? "none")
        case .keepalive(let ack, let opaque):
            guard read else { return }
            if ack {
                protocolStats.pongs += 1
                if let index = connection.pendingPings.firstIndex(where: { $0.opaque == opaque }) {
                    pingRoundTrips.record(nanoseconds: time - connection.pendingPings.remove(at: index).at)
                }
            } else {
                protocolStats.pings += 1
                if connection.pendingPings.count >= ConnectionState.pendingPingLimit { connection.pendingPings.removeFirst() }
                connection.pendingPings.append((opaque, time))
            }
        case .unreadable(let reason):
            guard read else { return }
            messageStats.undecodable += 1
            guard !connection.reportedUndecodable else { return }
            connection.reportedUndecodable = true
            record(
                .undecodable,
                pipe.cached?.ledger,
                direction: pipe.direction,
                time: time,
                connection: connection.id,
                detail: "\(reason), ending at byte \(offset) \(pipe.where) (reported once per connection)"
            )
        case .oversized(let bytes, _):
            guard read else { return }
            protocolStats.oversized += 1
            guard !connection.reportedOversized else { return }
            connection.reportedOversized = true
            record(
                .oversized,
                pipe.cached?.ledger,
                direction: pipe.direction,
                time: time,
                connection: connection.id,
                detail:
                    "a message of \(bytes) bytes, over protocol.max_message (\(layer.cap)), ending at byte \(offset) \(pipe.where): counted, not audited (reported once per connection)"
            )
        }
    }

    /// Both legs of the connection closed: what its end means to its protocol (an abnormal closure when no close frame was read),
    /// counted as read. Judged once per connection.
    func connectionEnded(_ connection: ConnectionState) {
        guard !connection.endJudged else { return }
        connection.endJudged = true
        for event in connection.session.ended(readCount: { family in connection.codesRead[family]?.reduce(0, +) ?? 0 }) {
            switch event {
            case .counted(let name): protocolStats[counter: name] += 1
            case .coded(let family, let code, _): protocolStats.count(family, code: code, fault: faults.label?.kind ?? "none")
            case .requestRead, .closing, .subscribed, .contract, .retained, .resumePoint, .keepalive, .unreadable, .oversized: break
            }
        }
    }
}

extension AuditEngine {
    /// The value a `header:`/`query:` key takes from the request that opened the connection (nil: another key, or none).
    static func handshakeValue(_ source: ProtocolSpec.StreamSource?, in session: any ProtocolSession) -> String? {
        switch source {
        case .header(let name): session.requestHeader(name)
        case .query(let name): session.requestQuery(name)
        case .field, .rpc, nil: nil
        }
    }

    /// Who the connection delivers to: its protocol's receiver (a broker's subscriber) or, with `fanout:`, the
    /// client it named; nil: one consumer at a time (or not named yet).
    func receiver(of connection: ConnectionState) -> String? {
        connection.session.receiver ?? connection.fanoutReceiver
    }

    /// `fanout:`: whether a message going `direction` on `connection` can be judged: one to a client that has not said
    /// who it is yet cannot (whose copy it is is unknown), and is counted as unattributed when `read`.
    @inline(__always)
    func fanoutAttributes(_ fields: MessageFields, _ direction: Direction, _ connection: ConnectionState, read: Bool) -> Bool {
        guard spec.fanout != nil, direction == .downstream, !fields.ignored, receiver(of: connection) == nil else { return true }
        if read { messageStats.unattributed += 1 }
        return false
    }

    /// `fanout:` without a handshake key: the sender a connection's first own message names is its receiver.
    @inline(__always)
    func fanoutSender(_ stream: ConnectionStream, _ direction: Direction, _ connection: ConnectionState) {
        guard direction == .upstream, connection.fanoutReceiver == nil, let fanout = spec.fanout, !fanout.receiverFromHandshake else { return }
        receiverJoined(stream.ledger.name, on: connection)
    }

    /// `fanout.resume`: what the receiver of `connection` says its application holds of each sender's stream (`bytes`,
    /// a JSON object of sender to seq, read as the proxy read it). Its copies an earlier connection delivered above
    /// that seq were never its application's: unless delivered again, they are lost, not ok (a server that skips one on
    /// resume, which a dead path delivered to the old connection just before the receiver left it). Nothing for a
    /// sender whose copy it was never written; nothing at all for a value that is not an object of integers.
    func fanoutResumed(_ bytes: UnsafeBufferPointer<UInt8>, on connection: ConnectionState) {
        guard let receiver = receiver(of: connection),
            let held = try? JSONDecoder().decode([String: Int64].self, from: Data(buffer: bytes))
        else { return }
        for (sender, seq) in held {
            guard let index = ledgerIndex[StreamKey(name: sender, direction: .downstream, receiver: receiver)] else { continue }
            ledgers[index].receiverResumed(after: seq, on: connection.order)
        }
    }

    /// `fanout:`: the connection delivers to `receiver` from now on.
    func receiverJoined(_ receiver: String, on connection: ConnectionState) {
        connection.fanoutReceiver = receiver
        joined(receiver)
    }

    /// A receiver's first subscription (or first connection): what each stream's producer had delivered by then is
    /// not owed to it, nor what was written to the server and not yet seen acknowledged (its TCP may have taken it,
    /// and the server handled it, before the subscription: the acknowledgement is seen a poll later, and later still
    /// on a loaded machine).
    func joined(_ receiver: String) {
        guard receiverBaselines[receiver] == nil else { return }
        var baseline: [String: Int64] = [:]
        for ledger in ledgers where ledger.direction == .upstream && ledger.receiver == nil {
            let handed = max(ledger.highestDelivered, ledger.highestWritten)
            if handed >= ledger.owedFrom { baseline[ledger.name] = handed }
        }
        receiverBaselines[receiver] = baseline
    }
}

extension FramePipe {
    /// Where the pipe's bytes go, for anomaly details.
    var `where`: String {
        "\(role == .sent ? "read from" : "written to") the \(role == .sent ? direction.producer : direction.consumer)"
    }
}
