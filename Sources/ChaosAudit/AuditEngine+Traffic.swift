import ChaosCore
import ChaosProtocols
import Glibc

extension AuditEngine {
    /// Audits one message; `call` is the RPC's call that carried it (its RPC names the fields, its metadata the stream);
    /// `named`, its stream where its framing named it.
    @inline(__always)
    func audit(
        _ frame: UnsafeBufferPointer<UInt8>,
        endingAt end: Int64,
        pipe: FramePipe,
        connection: ConnectionState,
        time: Int64,
        call: RPCCall? = nil,
        stream named: UnsafeBufferPointer<UInt8>? = nil
    ) {
        let copies = call == nil && layer.writtenCopiesRead
        let retained = pipe.retained
        if retained { pipe.retained = false }
        if copies, pipe.role == .delivered,
            let copy = connection.pipe(.sent, pipe.direction).readCopies.take(
                endingAt: end,
                frame,
                sameBytes: end - Int64(frame.count) >= pipe.verbatim.writtenSince
            )
        {
            return auditWrittenCopy(of: copy, endingAt: end, pipe: pipe, connection: connection, time: time)
        }
        let slot = pipe.direction == .upstream ? 0 : 1
        let byHandshake = slot == 0 ? namesStreamByHandshake.upstream : namesStreamByHandshake.downstream
        var fields = if let call { extract(frame, of: call, slot: slot) } else { extract(frame, slot: slot) }
        if let named { fields.stream = named }
        /// The message's stream: named by the connection's handshake or its RPC's call where the protocol says so.
        func connectionStream() -> ConnectionStream {
            guard byHandshake else { return stream(fields, pipe: pipe, connection: connection) }
            guard let call else { return stream(named: connection.handshakeStreams[slot]?[...], pipe: pipe, connection: connection) }
            if pipe.cachedCall === call, let cached = pipe.cached { return cached }
            let result = stream(named: streamName(of: call, slot: slot, connection: connection)?[...], pipe: pipe, connection: connection)
            pipe.cachedCall = call
            return result
        }
        guard fanoutAttributes(fields, pipe.direction, connection, read: pipe.role == .sent) else { return }
        if fields.undecodable {
            undecodable(frame, pipe: pipe, connection: connection, time: time)
            return
        }
        if let resume = fields.resume, pipe.role == .sent, pipe.direction == .upstream { fanoutResumed(resume, on: connection) }
        let seq = fields.ignored ? nil : fields.seq
        if fields.ignored {
            messageStats.ignored += 1
        } else if seq == nil, fields.ack == nil {
            messageStats.unsequenced += 1
            if pipe.role == .sent { sampleUnsequenced(frame, endingAt: end, direction: pipe.direction, connection: connection.id) }
        }
        if let ack = fields.ack, pipe.role == .sent {
            let acked = stated(ack, on: connectionStream().ledger, connection: connection.id)
            // Kept only while messages wait for the consumer's TCP: an ack can then name one of them.
            let toward = connection.pipe(.delivered, pipe.direction.reversed)
            if !toward.pending.isEmpty { toward.statedAcks[acked.index] = ack }
        }
        guard let seq else {
            if let ack = fields.ack, pipe.role == .delivered {
                written(seq: nil, ack: ack, connectionStream(), endingAt: end, pipe: pipe, connection: connection, time: time)
            } else if copies, pipe.role == .sent, fields.ack == nil {
                pipe.readCopies.append(
                    ReadCopy(
                        end: end,
                        length: frame.count,
                        hash: ReadCopies.hash(frame),
                        seq: nil,
                        ack: nil,
                        ignored: fields.ignored,
                        stream: nil
                    )
                )
            }
            return
        }
        // Written to a consumer that had already ended its call (the relay read that end before this write): its
        // application takes nothing more of the call, whatever its TCP acknowledges.
        if let call, pipe.role == .delivered, call.endedBy == pipe.direction.consumer {
            messageStats.afterCallEnded += 1
            return
        }
        let connectionStream = connectionStream()
        if pipe.role == .sent { fanoutSender(connectionStream, pipe.direction, connection) }
        if let call, pipe.role == .delivered { connectionStream.lastCall = ObjectIdentifier(call) }
        if let contract = pipe.contract { connectionStream.ledger.carried(contract) }
        if retained, pipe.role == .sent { connectionStream.retainedInFlight.insert(seq) }
        if copies, pipe.role == .sent {
            pipe.readCopies.append(
                ReadCopy(
                    end: end,
                    length: frame.count,
                    hash: ReadCopies.hash(frame),
                    seq: seq,
                    ack: fields.ack,
                    ignored: false,
                    stream: connectionStream
                )
            )
        }
        guard isPlausible(seq, connectionStream.ledger, pipe: pipe, connection: connection, time: time) else { return }
        if pipe.role == .sent {
            sent(seq, connectionStream, time: time)
            if pathLimits?.radioTail != nil { pathTracker.message(on: connection.id, at: time) }
        } else {
            written(seq: seq, ack: fields.ack, connectionStream, endingAt: end, pipe: pipe, connection: connection, time: time)
        }
    }

    /// A message written to its consumer whose fields were read as it was read from the producer (its bytes are the
    /// same): counted and judged as ``audit(_:endingAt:pipe:connection:time:call:stream:)`` would, without reading them again.
    private func auditWrittenCopy(
        of copy: ReadCopy,
        endingAt end: Int64,
        pipe: FramePipe,
        connection: ConnectionState,
        time: Int64
    ) {
        if copy.ignored {
            messageStats.ignored += 1
        } else if copy.seq == nil, copy.ack == nil {
            messageStats.unsequenced += 1
        }
        guard let seq = copy.seq, let stream = copy.stream else { return }
        writtenCopy(seq: seq, ack: copy.ack, stream, endingAt: end, pipe: pipe, connection: connection, time: time)
    }

    /// The written copy of a message of `stream` whose fields were read from its read copy: judged on `pipe` as if
    /// read there.
    @inline(__always)
    func writtenCopy(
        seq: Int64,
        ack: Int64?,
        _ stream: ConnectionStream,
        endingAt end: Int64,
        pipe: FramePipe,
        connection: ConnectionState,
        time: Int64
    ) {
        if pipe.cached !== stream {
            // What looking the stream up on this pipe would have left in its cache.
            pipe.cached = stream
            pipe.cachedCall = nil
            pipe.cachedName = stream.name ?? []
            pipe.cachedDefault = stream.name == nil
        }
        guard isPlausible(seq, stream.ledger, pipe: pipe, connection: connection, time: time) else { return }
        written(seq: seq, ack: ack, stream, endingAt: end, pipe: pipe, connection: connection, time: time)
    }

    /// Whether `seq` can be audited: a seq more than ``seqJumpLimit`` past the highest of its stream so far is a
    /// `seq jump` anomaly (counted, reported once per stream, not audited), never billions of lost messages.
    @inline(__always)
    func isPlausible(
        _ seq: Int64,
        _ ledger: StreamLedger,
        pipe: FramePipe,
        connection: ConnectionState,
        time: Int64
    ) -> Bool {
        let (limit, overflow) = max(ledger.highestSent, ledger.highestDelivered).addingReportingOverflow(Self.seqJumpLimit)
        guard seq > limit, !overflow else { return true }
        messageStats.seqJumps += 1
        if !ledger.reportedSeqJump {
            ledger.reportedSeqJump = true
            record(
                .seqJump,
                ledger,
                direction: pipe.direction,
                from: max(ledger.highestSent, ledger.highestDelivered),
                to: seq,
                time: time,
                connection: connection.id,
                detail: "seq \(seq) is more than \(Self.seqJumpLimit) past the highest so far: not audited (reported once per stream)"
            )
        }
        return false
    }

    /// A message was written to its consumer: delivered now, or once the consumer's TCP acknowledged its last byte.
    @inline(__always)
    func written(
        seq: Int64?,
        ack: Int64?,
        _ stream: ConnectionStream,
        endingAt end: Int64,
        pipe: FramePipe,
        connection: ConnectionState,
        time: Int64
    ) {
        if let seq, seq > stream.ledger.highestWritten { stream.ledger.highestWritten = seq }
        guard deliveryPoint == .acknowledged, end > pipe.acknowledged else {
            return delivered(seq: seq, ack: ack, stream, connection: connection.id, time: time)
        }
        if pipe.pending.count >= PendingDeliveries.capacity, let oldest = pipe.pending.popFirst() {
            unconfirmed(pipe: pipe, connection: connection, time: time)
            delivered(seq: oldest.seq, ack: oldest.ack, oldest.stream, connection: connection.id, time: time)
        }
        pipe.pending.append(PendingDelivery(end: end, seq: seq, ack: ack, stream: stream))
    }

    /// The consumer on `side` acknowledged the first `offset` bytes written to it: the messages they complete are
    /// delivered. An acknowledgement may come after the leg was cut (a FIN's, read as the socket closes): its
    /// messages were taken after all.
    func acknowledged(_ offset: Int64, by side: Side, connection id: ConnectionID, time: Int64) {
        guard let connection = connections[id] else { return }
        // A consumer that sent its close frame reads nothing more: what its TCP takes now is taken after close.
        // So does one that abandoned its open calls (a FIN with a call open), with its taking in doubt.
        if !isStopping, connection.closingSides.contains(side) || connection.abandonedBy.contains(side) {
            return acknowledgedAfterClose(offset, by: side, connection: id, time: time, doubted: connection.abandonedBy.contains(side))
        }
        let pipe = connection.pipe(.delivered, side.other.producing)
        guard offset > pipe.acknowledged else { return }
        pipe.acknowledged = offset
        let late = connection.deliveriesEnded.contains(side)
        while let message = pipe.pending.popFirst(endingBy: offset) {
            if message.callEndedFirst, !isStopping, let seq = message.seq, message.stream.ledger.takenAfterCallEnded(seq, on: message.stream) {
                continue
            }
            delivered(seq: message.seq, ack: message.ack, message.stream, connection: id, time: time, late: late)
        }
    }

    /// The consumer on `side` had ended its TLS session when the first `offset` bytes' last ones were written, and its
    /// TCP took them: the messages they complete are taken after close, delivered only if the consumer's own
    /// acknowledgements vouch for them later (see ``StreamLedger/confirmTakenAfterClose(upTo:)``). Acks they carry
    /// are not counted.
    /// Once the run is stopping no later acknowledgement can come: as on a cleartext half-close, what the consumer's
    /// TCP took is delivered (a stopped client reads what its server still sends after its own close_notify).
    /// One of them the consumer named in an ack it wrote on this connection (its application read that message, and
    /// every one written to it before, in order, though the proxy saw the TCP acknowledgement only after the
    /// consumer's close: a client that acks its last message and answers the proxy's closing handshake in one
    /// segment) is delivered with those before it.
    /// `doubted`: the consumer abandoned its open work rather than ending its session: what its TCP took is unconfirmed
    /// (neither ok nor lost) unless its acks or a resend settle it, as what it took past its last ack before then.
    func acknowledgedAfterClose(_ offset: Int64, by side: Side, connection id: ConnectionID, time: Int64, doubted: Bool = false) {
        if isStopping { return acknowledged(offset, by: side, connection: id, time: time) }
        guard let connection = connections[id] else { return }
        let pipe = connection.pipe(.delivered, side.other.producing)
        guard offset > pipe.acknowledged else { return }
        pipe.acknowledged = offset
        var taken: [PendingDelivery] = []
        while let message = pipe.pending.popFirst(endingBy: offset) { taken.append(message) }
        let named = pipe.statedAcks.isEmpty ? nil : taken.lastIndex { $0.seq != nil && pipe.statedAcks[$0.stream.ledger.index] == $0.seq }
        let late = connection.deliveriesEnded.contains(side)
        for (index, message) in taken.enumerated() {
            if let named, index <= named {
                delivered(seq: message.seq, ack: message.ack, message.stream, connection: id, time: time, late: late)
            } else if let seq = message.seq {
                message.stream.ledger.takenAfterClose.insert(seq)
                if doubted { message.stream.ledger.takenBeforeReset.insert(seq) }
            }
        }
    }

    /// No acknowledgement of the first `offset` bytes written to `side` can come any more (its way back was cut: see
    /// ``TrafficEvent/PathEvent/acknowledgementsCut(_:upTo:)``): the messages they complete that still wait are
    /// unconfirmed, as those a consumer's TCP took before a reset are: a later delivery, the consumer's own ack
    /// above them, or one below them (its resume point) settles them; nothing else counts them lost. A resume point
    /// the consumer had already named on a newer connection settles those past it too: it said it would take them
    /// there, and then reset this connection with bytes unread (a server taking a stream over drops the old
    /// connection's unread bytes: through a dead path in the kernel they reach it as it does).
    func acknowledgementsCut(_ offset: Int64, to side: Side, connection id: ConnectionID) {
        guard let connection = connections[id] else { return }
        let pipe = connection.pipe(.delivered, side.other.producing)
        let slot = side == .server ? 0 : 1
        // The stream's states on the other connections, looked up once per stream.
        var others: [Int: [ConnectionStream]] = [:]
        while let message = pipe.pending.popFirst(endingBy: offset) {
            guard let seq = message.seq else { continue }
            let ledger = message.stream.ledger
            ledger.takenAfterClose.insert(seq)
            ledger.takenBeforeReset.insert(seq)
            // A consumer that had named its resume point on a newer connection, and then reset this one with these
            // bytes unread, threw away what it said it would take there: denied, as an ack below them denies. The
            // resume point, not its later acks there: those name what the new connection carried since (s78h1: a
            // server's acks of 75-97 on its new connection came before the old connection's reset was read, and seq
            // 74, which only the old one carried and the client skipped on resume, stayed unconfirmed, not lost).
            // The denial is of this connection's copy: where another connection already delivered the seq, that copy
            // is judged by its own connection's acks (``delivered(_:_:connection:time:late:)`` lifts a denial too).
            guard ledger.resumedBelow(seq, newerThan: connection.order) else { continue }
            let copies = others[ledger.index] ?? otherStreams(of: ledger, besides: connection, slot: slot)
            others[ledger.index] = copies
            if copies.contains(where: { $0.deliveredHere.contains(seq) }) { continue }
            ledger.deniedAfterClose.insert(seq)
        }
    }

    @inline(__always)
    private func delivered(
        seq: Int64?,
        ack: Int64?,
        _ stream: ConnectionStream,
        connection: ConnectionID,
        time: Int64,
        late: Bool = false
    ) {
        if let ack { acknowledge(ack, on: stream.ledger, connection: connection) }
        if let seq { delivered(seq, stream, connection: connection, time: time, late: late) }
    }

    private func unconfirmed(pipe: FramePipe, connection: ConnectionState, time: Int64) {
        messageStats.unconfirmed += 1
        guard !connection.reportedUnconfirmed else { return }
        connection.reportedUnconfirmed = true
        record(
            .unconfirmed,
            pipe.cached?.ledger,
            direction: pipe.direction,
            time: time,
            connection: connection.id,
            detail:
                "more than \(PendingDeliveries.capacity) messages written to the \(pipe.direction.consumer) and never acknowledged by its TCP (a capture without its ACK segments?): the oldest are counted as delivered when written (reported once per connection)"
        )
    }

    func undecodable(_ frame: UnsafeBufferPointer<UInt8>, pipe: FramePipe, connection: ConnectionState, time: Int64) {
        messageStats.undecodable += 1
        guard !connection.reportedUndecodable else { return }
        connection.reportedUndecodable = true
        let snippet = String(decoding: frame.prefix(80), as: UTF8.self).map { $0.isASCII && !$0.isNewline ? $0 : "." }
        record(
            .undecodable,
            pipe.cached?.ledger,
            direction: pipe.direction,
            time: time,
            connection: connection.id,
            detail:
                "not a \(spec.format.rawValue) message with an integer '\(spec.resolved(for: pipe.direction).seq)': \(String(snippet)) (reported once per connection)"
        )
    }

    /// The state of the stream the message names (or the connection's default stream) on this connection.
    @inline(__always)
    func stream(_ fields: MessageFields, pipe: FramePipe, connection: ConnectionState) -> ConnectionStream {
        if let name = fields.stream {
            if let cached = pipe.cached, !pipe.cachedDefault, Self.sameBytes(name, pipe.cachedName) { return cached }
            return stream(named: Array(name)[...], pipe: pipe, connection: connection)
        }
        return stream(named: nil, pipe: pipe, connection: connection)
    }

    /// Whether `bytes` are `name`'s bytes (one length check and one `memcmp`).
    @inline(__always)
    static func sameBytes(_ bytes: UnsafeBufferPointer<UInt8>, _ name: [UInt8]) -> Bool {
        guard bytes.count == name.count else { return false }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return true }
        return name.withUnsafeBufferPointer { memcmp(base, $0.baseAddress!, bytes.count) == 0 }
    }

    /// The state of the stream named `name` (or the connection's default stream) on this connection.
    func stream(named name: ArraySlice<UInt8>?, pipe: FramePipe, connection: ConnectionState) -> ConnectionStream {
        if let cached = pipe.cached {
            if let name {
                if !pipe.cachedDefault, name.withUnsafeBufferPointer({ Self.sameBytes($0, pipe.cachedName) }) { return cached }
            } else if pipe.cachedDefault {
                return cached
            }
        }
        let text = name.map { String(decoding: $0, as: UTF8.self) } ?? "#\(connection.id)"
        let ledger = self.ledger(text, pipe.direction, receiver: pipe.direction == .downstream ? receiver(of: connection) : nil)
        let slot = pipe.direction == .upstream ? 0 : 1
        let result: ConnectionStream
        if let existing = connection.streams[slot][ledger.index] {
            result = existing
        } else {
            result = ConnectionStream(ledger: ledger, connectionOrder: connection.order)
            result.name = name.map(Array.init)
            connection.streams[slot][ledger.index] = result
            carried(ledger, on: connection.order)
        }
        pipe.cached = result
        pipe.cachedCall = nil
        pipe.cachedName = name.map(Array.init) ?? []
        pipe.cachedDefault = name == nil
        return result
    }

    /// The ledger of stream `name` one way, for `receiver`'s copy of it when the stream fans out to several.
    func ledger(_ name: String, _ direction: Direction, receiver: String? = nil) -> StreamLedger {
        let key = StreamKey(name: name, direction: direction, receiver: receiver)
        if let index = ledgerIndex[key] { return ledgers[index] }
        let owedFrom = receiver.flatMap { receiverBaselines[$0]?[name] }.map { $0 + 1 }
        let ledger = StreamLedger(index: ledgers.count, name: name, direction: direction, receiver: receiver, seqStart: seqStart, owedFrom: owedFrom)
        ledgers.append(ledger)
        ledgerIndex[key] = ledger.index
        // Acks travel between a stream's two directions of one conversation: a receiver's copy has no partner.
        if receiver == nil, let partner = ledgerIndex[StreamKey(name: name, direction: direction.reversed)] {
            ledger.partnerIndex = partner
            ledgers[partner].partnerIndex = ledger.index
        }
        return ledger
    }

    /// A cumulative ack read from the consumer of the other direction of stream `ledger`: what it says it processed,
    /// as soon as it says it (whether or not the ack reaches the producer), denies the seqs above it that its TCP took
    /// before a reset (see ``StreamLedger/denyTakenAfterClose(above:)``).
    /// Returns the ledger the ack is for.
    @discardableResult
    func stated(_ ack: Int64, on ledger: StreamLedger, connection id: ConnectionID) -> StreamLedger {
        let partner = ledger.partnerIndex.map { ledgers[$0] } ?? self.ledger(ledger.name, ledger.direction.reversed)
        let here = connections[id]?.streams[partner.direction == .upstream ? 0 : 1][partner.index]
        if let here, !here.endedUnread.isEmpty {
            partner.denyTakenAfterClose(above: ack, sparing: here.endedUnread)
            partner.stated(ack, afterResetOf: here)
        } else {
            partner.denyTakenAfterClose(above: ack)
        }
        let order = connections[id]?.order ?? 0
        if order > partner.consumerAckedOn {
            carried(partner, on: order)
            let slot = partner.direction == .upstream ? 0 : 1
            partner.resumePointNamed(ack, on: order) { closed in
                connections.values.compactMap { $0.order == closed.connectionOrder ? nil : $0.streams[slot][partner.index] }
            }
        }
        partner.consumerStated(ack, on: order)
        if let here { here.consumerAck = max(here.consumerAck ?? .min, ack) }
        return partner
    }

    /// Stream `ledger` showed up on the connection `order` (``ConnectionState/order``: its first message there, or its
    /// consumer's first ack): an older connection still half-open in a fault that carried it (either way) is one the
    /// pair has left (``RecoveryTracker/movedOn(from:at:)``).
    func carried(_ ledger: StreamLedger, on order: ConnectionOrder) {
        guard recovery.holdsHalfOpen else { return }
        let partner = ledger.partnerIndex.map { ledgers[$0] }
        for (other, state) in connections where state.order < order {
            let carriedThere = [ledger, partner].contains { stream in
                stream.map { state.streams[$0.direction == .upstream ? 0 : 1][$0.index] != nil } ?? false
            }
            if carriedThere { recovery.movedOn(from: other, at: now) }
        }
    }

    /// A cumulative ack delivered with stream `ledger`'s messages on `connection` covers the other direction's seqs.
    /// It vouches for seqs taken after a close only when its seq is not one written on that connection and still in
    /// flight: the proxy can read the consumer's ack before it sees the TCP acknowledgement of the message the ack is
    /// for (a loaded machine), and a consumer whose ack is its highest seq would otherwise vouch for a seq a buggy
    /// producer skipped on resume.
    private func acknowledge(_ ack: Int64, on ledger: StreamLedger, connection id: ConnectionID) {
        let partner = ledger.partnerIndex.map { ledgers[$0] } ?? self.ledger(ledger.name, ledger.direction.reversed)
        if ack > (partner.ackedUpTo ?? .min) { partner.ackedUpTo = ack }
        guard partner.namesUndelivered(ack) else { return }
        let slot = partner.direction == .upstream ? 0 : 1
        if connections[id]?.streams[slot][partner.index]?.inFlight.contains(ack) == true { return }
        partner.confirmTakenAfterClose(upTo: ack)
        vouchForRetiring(partner, upTo: ack)
    }

    /// A vouching ack (``StreamLedger/confirmTakenAfterClose(upTo:)``) may come before the doubt it settles: a message
    /// written to a connection that both ends have closed waits there for its TCP acknowledgement until the connection
    /// retires (``retireGrace``), and its consumer, back on a new connection within milliseconds, resumes past it (a TLS
    /// server read it as its idle timeout ended its session and named it in its welcome on the next connection: a
    /// fresh-clone run, s60q3). The messages of `ledger` up to `ack` still waiting on such connections are vouched for
    /// now; those that their TCP acknowledgement then delivers are simply delivered. Only those waiting now: a later
    /// doubt is settled by a later ack. And only on a connection whose waiting run holds the seq the ack names (as
    /// ``StreamLedger/confirmTakenAfterClose(upTo:)`` vouches only for the run holding it): an ack above all of them
    /// names what a later connection carried, and says nothing of them (a consumer that a producer skipped past them
    /// acknowledges what came after: a fresh-clone run, s80q2).
    private func vouchForRetiring(_ ledger: StreamLedger, upTo ack: Int64) {
        for id in retiring.ids {
            guard let connection = connections[id] else { continue }
            let waiting = connection.pipe(.delivered, ledger.direction).pending.waiting.filter { $0.stream.ledger === ledger }
            guard let highest = waiting.compactMap(\.seq).max(), ack <= highest else { continue }
            for message in waiting {
                guard let seq = message.seq, seq <= ack, !ledger.deniedAfterClose.contains(seq) else { continue }
                ledger.confirmedAfterClose.insert(seq, through: seq)
            }
        }
    }

    @inline(__always)
    func sent(_ seq: Int64, _ stream: ConnectionStream, time: Int64) {
        let ledger = stream.ledger
        guard seq >= ledger.seqStart else {
            messageStats.belowStart += 1
            return
        }
        ledger.counts.sent += 1
        if seq > ledger.highestSent { ledger.highestSent = seq }
        stream.inFlight.insert(seq)
        stream.transit.push(seq, at: time)
    }

    /// `late`: acknowledged after its connection's deliveries had ended (it is not a recovery: it arrived where it was sent).
    @inline(__always)
    private func delivered(_ seq: Int64, _ stream: ConnectionStream, connection: ConnectionID, time: Int64, late: Bool = false) {
        let ledger = stream.ledger
        guard seq >= ledger.seqStart else {
            messageStats.belowStart += 1
            return
        }
        ledger.counts.delivered += 1
        activity.count(.delivered, at: time)
        if !ledger.disowned.isEmpty { ledger.settleDisowned(seq, on: stream.connectionOrder) }
        if !stream.inFlight.isEmpty {
            stream.inFlight.remove(seq)
            if let readAt = stream.transit.pop(seq) { transit.record(nanoseconds: time - readAt) }
        }
        if !stream.retainedInFlight.isEmpty, stream.retainedInFlight.remove(seq) {
            return deliveredRetained(seq, stream, connection: connection, late: late)
        }
        if !ledger.retainedFirst.isEmpty, ledger.retainedFirst.remove(seq) {
            // The live copy of a seq whose retained copy came first (the broker's queue drained after the
            // re-subscription's retained message): the pair's extra delivery is the retained one; order is judged now.
            ledger.counts.retained += 1
            _ = stream.deliveredHere.insert(seq)
            return judgeOrder(seq, ledger, connection: connection, time: time)
        }
        guard stream.deliveredHere.insert(seq) else {
            ledger.counts.duplicated += 1
            record(.duplicated, ledger, direction: ledger.direction, from: seq, to: seq, time: time, connection: connection)
            return
        }
        guard ledger.deliveredSeqs.insert(seq) else {
            ledger.countRedelivered(seq)
            record(.redelivered, ledger, direction: ledger.direction, from: seq, to: seq, time: time, connection: connection)
            return
        }
        // A denial spoke of an earlier copy (one a reset connection took, or one an ack below it disowned): this copy is
        // judged by its own connection's acks. (s79: a client's heartbeat reset the connection the resend of 421-431
        // was delivered on, and its ack of 513 on the next one vouched for them; the denial of the copies its first
        // connection had taken before the partition's end still held them back: 11 lost that its log processed.)
        if !ledger.deniedAfterClose.isEmpty { _ = ledger.deniedAfterClose.remove(seq) }
        if !ledger.cutInFlight.isEmpty, ledger.cutInFlight.remove(seq), !late { ledger.counts.recovered += 1 }
        if stream.connectionOrder < ledger.consumerAckedOn { ledger.deliveredAfterMove(seq, stream) }
        judgeOrder(seq, ledger, connection: connection, time: time)
    }

    /// Retained state sent again (a re-subscription's retained message): one the consumer already had is counted as
    /// retained, neither duplicated nor redelivered; one it had not is a delivery that says nothing of the stream's
    /// order (it jumps ahead of what the broker still queues), and the live copy that follows is the retained extra.
    private func deliveredRetained(_ seq: Int64, _ stream: ConnectionStream, connection: ConnectionID, late: Bool) {
        let ledger = stream.ledger
        _ = stream.deliveredHere.insert(seq)
        guard ledger.deliveredSeqs.insert(seq) else {
            ledger.counts.retained += 1
            return
        }
        ledger.retainedFirst.insert(seq)
        if !ledger.cutInFlight.isEmpty, ledger.cutInFlight.remove(seq), !late { ledger.counts.recovered += 1 }
    }

    /// A first delivery of `seq`: reordered when a higher seq came first, a gap when it skips ahead. A seq whose
    /// delivery was in doubt (taken by the consumer's TCP, in order, on a connection that then ended: ``StreamLedger/takenAfterClose``)
    /// is reordered only when a seq above it was delivered since: its resend after a resume, in order, is not.
    private func judgeOrder(_ seq: Int64, _ ledger: StreamLedger, connection: ConnectionID, time: Int64) {
        let highest = ledger.highestDelivered
        if seq < highest {
            let doubtedInOrder = ledger.takenAfterClose.contains(seq) && (ledger.deliveredSeqs.max ?? seq) <= seq
            guard !doubtedInOrder else { return judged(seq, ledger, at: time) }
            ledger.counts.reordered += 1
            record(
                .reordered,
                ledger,
                direction: ledger.direction,
                from: seq,
                to: seq,
                time: time,
                connection: connection,
                detail: "after \(highest)"
            )
        } else {
            if seq > highest + 1 {
                ledger.counts.gaps += 1
                record(
                    .gap,
                    ledger,
                    direction: ledger.direction,
                    from: highest + 1,
                    to: seq - 1,
                    time: time,
                    connection: connection
                )
            }
            ledger.highestDelivered = seq
        }
        judged(seq, ledger, at: time)
    }

    /// A first delivery judged: faults waiting for the stream's next message hear of it.
    private func judged(_ seq: Int64, _ ledger: StreamLedger, at time: Int64) {
        if !ledger.resumeWaits.isEmpty { recovery.delivered(seq, on: ledger, at: time) }
    }

    /// A leg of a connection closed. A FIN means `side` stopped sending (a half-close): writes to it may still
    /// come. A reset, a cut or an error means it is gone both ways. Once both legs are closed, nothing more is
    /// delivered on the connection either way.
    /// `synthetic` closes come from ``finish()`` (the run ended, not the pair): they do not count as recovery events.
    func closed(_ id: ConnectionID, side: Side, how: TrafficEvent.CloseKind, time: Int64, synthetic: Bool = false) {
        guard let connection = connections[id] else { return }
        leaveLockstep(connection, .upstream)
        leaveLockstep(connection, .downstream)
        let first = !connection.clientClosed && !connection.serverClosed
        if side == .client { connection.clientClosed = true } else { connection.serverClosed = true }
        if how.isFaultCut, !connection.cutByFault {
            connection.cutByFault = true
            connectionStats.cutByFault += 1
        }
        connection.pipe(.sent, side.producing).decoder.dropPartial()
        if how != .fin { endDeliveries(toward: side, of: connection, how: how, time: time) }
        // A consumer whose leg ends abortively may never have read what its TCP took past its last ack. With no proxy
        // between the ends a reset reaches both consumers; through a proxy, an RST on a leg (the peer's own, or one the
        // proxy sent: a fault's reset, a reset passed on) reaches the consumer on that leg only, so a capture of both
        // legs, whatever order it sees the two resets in, judges each direction by its own leg's end.
        // So does one whose FIN leaves its protocol's work open, for what it consumed (``LegDecoder/leavesWorkOpen``: an
        // RPC server or client that closes with a call nobody ended took the bytes into its protocol stack, and a call
        // torn down hands its application nothing more); and one whose leg a fault closed in order (a FIN cut: a
        // protocol fault's grace ending, a `disconnect` of mode close) with its work open, which tears its calls down as
        // its own FIN would (the proxy records the cut, where a capture sees the consumer's FIN answer it: s62q1's naive
        // RPC run counted 242-250 delivered live and lost in its capture's audit).
        let abandons = (how == .fin || how == .cutByFault) && connection.pipe(.sent, side.producing).decoder.leavesWorkOpen
        // What the abandoning consumer's TCP acknowledges from now on was taken before its close but handed to no
        // reader either: a FIN that also acknowledges the last bytes written (one ACK+FIN segment, the FIN read first,
        // live and in a capture) must not deliver them after the doubt was cast.
        if abandons, !isStopping { connection.abandonedBy.insert(side) }
        if how.isAbortive || abandons, !isStopping {
            let directions: [Direction] =
                connection.direct && !abandons ? [.upstream, .downstream] : [side == .server ? .upstream : .downstream]
            for direction in directions {
                let slot = direction == .upstream ? 0 : 1
                for stream in connection.streams[slot].values {
                    stream.ledger.unconfirmAborted(
                        stream.deliveredHere,
                        on: connection.order,
                        others: { self.otherStreams(of: stream.ledger, besides: connection, slot: slot) },
                        withdrawn: { self.withdrawRedelivery($0, of: stream.ledger) }
                    )
                }
            }
        }
        if !isStopping {
            consumerLeft(connection, side: side)
            for stream in connection.streams[side == .server ? 0 : 1].values { stream.ledger.consumerClosed(stream) }
        }
        let carried =
            synthetic
            ? []
            : connection.streams.flatMap { $0.values.filter(\.carriedTraffic).map(\.ledger) }
                .sorted { $0.index < $1.index }
        if !synthetic {
            recovery.closed(
                id,
                side: side,
                kind: how,
                at: time,
                openedAt: connection.openedAt,
                first: first,
                streams: first ? carried : []
            )
            if first { activity.count(.closed, at: time) }
        }
        if first { connectionStats.closed += 1 }
        // Once both producers stopped, every close frame either sent is read: none means an abnormal closure.
        if connection.fullyClosed, !synthetic { connectionEnded(connection) }
        if connection.fullyClosed {
            // Both sides have stopped sending, but what the proxy still held for them (a partition's backlog,
            // a latency queue) may be written after their FINs: the connection retires a grace later.
            retiring.append(id, closedAt: time)
            nextRetirement = min(nextRetirement, time + Self.retireGrace)
        }
    }

    /// The consumer on `side` ended `call` on `connection`: what the call delivered to it past the last ack it stated on
    /// the connection is unconfirmed (``SupersededDeliveries``).
    /// A reset ends the call for the other side's consumer too: a client that cancels its call (resets it) has the
    /// server's stack drop the requests its handler had not read (s65's loop: a buggy RPC pair's cancelled call, whose
    /// 117 the server's TCP took and its handler never read, counted ok; its resend skipped, the loss was missed). That
    /// consumer's acks still read on the connection were written before it learnt of the reset: they vouch for what
    /// they name, and deny nothing of the call's (``ConnectionStream/endedUnread``).
    func callEnded(_ call: RPCCall, by side: Side, of connection: ConnectionState) {
        guard !isStopping else { return }
        let id = ObjectIdentifier(call)
        for consumer in call.endedAbortively ? [side, side.other] : [side] {
            let slot = consumer == .server ? 0 : 1
            for stream in connection.streams[slot].values where stream.lastCall == id {
                stream.ledger.consumerEndedCall(
                    stream,
                    byReset: consumer != side,
                    others: { self.otherStreams(of: stream.ledger, besides: connection, slot: slot) },
                    withdrawn: { self.withdrawRedelivery($0, of: stream.ledger) }
                )
            }
            // Written to the call before its end was read, acknowledged after: the segment that carried the end (its
            // trailers, its reset) usually acknowledged them too, and is read end first, live and in a capture.
            guard consumer == side else { continue }
            let pipe = connection.pipe(.delivered, side.other.producing)
            pipe.pending.markCallEnded { $0.seq != nil && $0.stream.lastCall == id }
        }
    }

    /// The same stream's state on every other connection still known.
    private func otherStreams(of ledger: StreamLedger, besides connection: ConnectionState, slot: Int) -> [ConnectionStream] {
        connections.values.compactMap { other in other === connection ? nil : other.streams[slot][ledger.index] }
    }

    /// The consumer on `side` ended `connection`: what it delivered there after that consumer had moved to a newer
    /// connection is unconfirmed (``SupersededDeliveries``).
    private func consumerLeft(_ connection: ConnectionState, side: Side) {
        let slot = side == .server ? 0 : 1
        for stream in connection.streams[slot].values where !stream.superseded.isEmpty {
            stream.ledger.consumerLeft(
                stream,
                others: otherStreams(of: stream.ledger, besides: connection, slot: slot),
                withdrawn: { self.withdrawRedelivery($0, of: stream.ledger) }
            )
        }
    }

    /// A redelivery of `seq` counted on `ledger` is withdrawn (``StreamLedger/copyInDoubt(_:others:withdrawn:)``): so is
    /// its anomaly.
    private func withdrawRedelivery(_ seq: Int64, of ledger: StreamLedger) {
        anomalies.withdraw(.redelivered) {
            $0.stream == ledger.name && $0.direction == ledger.direction && $0.receiver == ledger.receiver && $0.fromSeq == seq
        }
    }

    /// Retires connections closed on both sides more than ``retireGrace`` ago: whatever was still in
    /// flight to them was not delivered, and their state is dropped (memory stays bounded).
    func retireClosedConnections(before time: Int64) {
        while let (id, closedAt) = retiring.first, time - closedAt > Self.retireGrace {
            retiring.removeFirst()
            guard let connection = connections[id], connection.fullyClosed else { continue }
            for end in Side.allCases { endDeliveries(toward: end, of: connection, how: .fin, time: time) }
            connections[id] = nil
        }
        nextRetirement = retiring.first.map { $0.closedAt + Self.retireGrace } ?? .max
    }

    /// Writes to `side` are over: a partial frame there was cut, and what is still in flight was not delivered.
    func endDeliveries(toward side: Side, of connection: ConnectionState, how: TrafficEvent.CloseKind, time: Int64) {
        guard connection.deliveriesEnded.insert(side).inserted else { return }
        let consumed = side.other.producing
        leaveLockstep(connection, consumed)
        let writePipe = connection.pipe(.delivered, consumed)
        if writePipe.decoder.hasPartialMessage {
            writePipe.decoder.dropPartial()
            let ledger = writePipe.cached?.ledger
            ledger?.counts.truncated += 1
            if ledger == nil { messageStats.undecodable += 1 }
            record(
                .truncated,
                ledger,
                direction: consumed,
                from: (ledger?.highestDelivered).map { $0 + 1 },
                time: time,
                connection: connection.id,
                detail: "a frame cut in half when the \(side) leg closed (\(how.rawValue))"
            )
        }
        // Written and not acknowledged (yet: a late acknowledgement still delivers them): their seqs are cut in flight.
        // The consumer may have taken them all the same (its acknowledgement came after the proxy last read its
        // socket, or rode on the reset that ended it): like messages taken after a TLS close, its own ack may vouch.
        for message in writePipe.pending.waiting { if let seq = message.seq { _ = message.stream.ledger.takenAfterClose.insert(seq) } }
        let slot = consumed == .upstream ? 0 : 1
        for stream in connection.streams[slot].values where !stream.inFlight.isEmpty {
            stream.ledger.cutInFlight.formUnion(stream.inFlight)
            stream.inFlight.removeAll()
            stream.transit = TransitQueue()
        }
    }
}
