package import ChaosCore

/// Turns the datagram events of QUIC flows (a `udp://` proxy's, or a capture's) into the byte-stream events of their
/// QUIC streams, so that the audit judges each stream's messages as it judges a TCP connection's: each stream is a
/// connection of its own (opened at its first STREAM frame), its bytes read in offset order from the packets its
/// sender sent (`read`), written in offset order as the proxy handed the packets to the receiver (`written`), and
/// acknowledged up to the first offset the receiver's ACK frames do not cover (an acknowledged packet behind a gap is
/// not yet the application's: PRODUCT.md §15). A FIN finishes a stream's direction once every byte before it came; a
/// RESET_STREAM or the connection's close ends it abortively.
///
/// Events of other connections, and run-wide ones, pass through unchanged. Memory is bounded per flow: the packets
/// whose stream bytes wait for an acknowledgement (the newest ``trackedPackets``) and the decoded datagrams waiting to
/// be written (at most ``defaultCacheBudget`` bytes across flows, oldest dropped first: a datagram a fault dropped is never
/// written).
package final class QUICStreamEvents {
    /// The newest packets per sender whose stream bytes an ACK can still cover.
    static let trackedPackets = 16384
    /// The bytes of datagrams read and not yet written (across flows) whose packets are kept for their write, by default.
    static let defaultCacheBudget = 32 << 20
    private let cacheBudget: Int

    private let secrets: QUICConnectionDecoder.SecretsLookup
    private let newID: () -> ConnectionID
    /// The flows (QUIC connections) being followed, by their connection.
    private(set) var flows: [ConnectionID: QUICFlow] = [:]

    /// Counted across flows: datagrams opened, packets that could not be opened (and why, the first few).
    package private(set) var packetsOpened = 0
    /// Packets that could not be opened, with those still waiting for their keys.
    package var packetsUnopened: Int { unopened + flows.values.reduce(0) { $0 + $1.decoder.awaitingKeys } }
    package private(set) var firstProblems: [String] = []
    private var unopened = 0
    /// What the paths of the flows already forgotten did.
    private var finishedPaths = QUICPathSummary()

    /// What the QUIC connections' paths did so far: changes, migrations, stalls (``QUICPathWatch``).
    package var paths: QUICPathSummary {
        var summary = finishedPaths
        for flow in flows.values { summary.add(flow.path) }
        return summary
    }
    /// The datagrams kept for their writes, oldest first (some already written and gone from their flow's cache), and
    /// the bytes of those still kept.
    private var cached: [(flow: ConnectionID, datagram: [UInt8])] = []
    private var cachedBytes = 0
    private var liveCached = 0

    /// `flows`: which connections are QUIC flows (the others pass through); `secrets` as for the decoder; `newID`
    /// numbers the streams' connections.
    package init(
        secrets: @escaping QUICConnectionDecoder.SecretsLookup,
        newID: @escaping () -> ConnectionID,
        cacheBudget: Int = QUICStreamEvents.defaultCacheBudget
    ) {
        self.secrets = secrets
        self.newID = newID
        self.cacheBudget = cacheBudget
    }

    /// The bytes of datagrams kept for their writes now (at most the budget).
    package var keptBytes: Int { cachedBytes }

    /// The events `event` stands for.
    package func transform(_ event: TrafficEvent) -> [TrafficEvent] {
        let id = event.connection
        switch event.kind {
        case .opened(let endpoints):
            guard id != 0 else { return [event] }
            flows[id] = QUICFlow(id: id, endpoints: endpoints, decoder: QUICConnectionDecoder(secrets: secrets))
            return []
        case .read(let side, let datagram):
            guard let flow = flows[id] else { return [event] }
            return read(datagram, from: side, flow: flow, time: event.time)
        case .written(let side, let datagram):
            guard let flow = flows[id] else { return [event] }
            return written(datagram, to: side, flow: flow, time: event.time)
        case .acknowledged, .acknowledgedAfterClose:
            return flows[id] == nil ? [event] : []
        case .closed(let side, let how):
            guard let flow = flows[id] else { return [event] }
            var events = flow.cutAcknowledgements(time: event.time)
            for stream in flow.streams.values where !stream.closed[side.quicSlot] {
                stream.closed[side.quicSlot] = true
                events.append(TrafficEvent(time: event.time, connection: stream.id, kind: .closed(side, how)))
            }
            if flow.streams.values.allSatisfy({ $0.closed.allSatisfy { $0 } }) || side == .server {
                forget(id)
            }
            return events
        case .path(let pathEvent):
            guard let flow = flows[id] else { return [event] }
            if pathEvent == .rebound {
                // The proxy moved the flow: the connection's path changed, which its path watch judges, and the server's
                // ACKs of what was written to it so far go to the old socket (a server that migrates sends them again).
                flow.path.rebound()
                flow.markRebound()
                return []
            }
            return flow.streams.values.map { TrafficEvent(time: event.time, connection: $0.id, kind: event.kind) }
        default:
            return [event]
        }
    }

    /// Keeps the packets of `datagram` for its write (those that carry stream bytes), within ``cacheBudget``.
    private func remember(_ datagram: [UInt8], packets: [QUICPacketRecord], flow: QUICFlow) {
        guard flow.remember(datagram, packets: packets) else { return }
        cached.append((flow.id, datagram))
        cachedBytes += datagram.count
        liveCached += 1
        var dropped = 0
        while cachedBytes > cacheBudget, dropped < cached.count {
            let oldest = cached[dropped]
            dropped += 1
            if flows[oldest.flow]?.drop(oldest.datagram) == true {
                cachedBytes -= oldest.datagram.count
                liveCached -= 1
            }
        }
        if dropped > 0 { cached.removeFirst(dropped) }
        // Entries already written stay in the list until here: it is swept once they outnumber the kept ones.
        if cached.count > 2 * liveCached + 1024 {
            cached.removeAll { flows[$0.flow]?.keeps($0.datagram) != true }
        }
    }

    /// Forgets a flow; its packets still waiting for keys are unopened.
    private func forget(_ id: ConnectionID) {
        guard let flow = flows.removeValue(forKey: id) else { return }
        finishedPaths.add(flow.path)
        cachedBytes -= flow.keptBytes
        liveCached -= flow.keptCount
        if flow.decoder.awaitingKeys > 0 {
            unopened += flow.decoder.awaitingKeys
            if firstProblems.count < 5 { firstProblems.append("\(flow.decoder.awaitingKeys) packet(s) whose keys never came") }
        }
    }

    // MARK: reads: what a sender sent

    private func read(_ datagram: [UInt8], from datagramSide: Side, flow: QUICFlow, time: Int64) -> [TrafficEvent] {
        let (packets, unopened) = flow.decoder.decode(datagram: datagram[...], from: datagramSide == .client ? .client : .server)
        packetsOpened += packets.count
        self.unopened += unopened.count
        for problem in unopened where firstProblems.count < 5 { firstProblems.append(problem.description) }
        remember(datagram, packets: packets.filter { $0.lateFrom == nil }, flow: flow)
        var events: [TrafficEvent] = []
        for packet in packets {
            // A packet that waited for its keys may be the other end's, and its datagram already passed on.
            let sender = packet.sender
            let side: Side = sender == .client ? .client : .server
            flow.path.read(packet, at: time)
            defer {
                if let late = packet.lateFrom {
                    remember(late, packets: [packet], flow: flow)
                    if let receiver = flow.passedOnUnrecalled(late) { events += written(late, to: receiver, flow: flow, time: time) }
                }
            }
            var carried: [(stream: UInt64, range: Range<UInt64>)] = []
            for frame in packet.frames {
                switch frame {
                case .stream(let streamID, let offset, let data, let fin):
                    let stream = flow.stream(streamID, opened: &events, time: time, newID: newID)
                    carried.append((streamID, offset..<(offset + UInt64(data.count))))
                    let direction = stream.direction(from: sender)
                    let fresh = direction.sent.add(offset: offset, data: data, fin: fin)
                    if !fresh.isEmpty { events.append(TrafficEvent(time: time, connection: stream.id, kind: .read(side, fresh))) }
                    if direction.sent.isFinished, !stream.closed[side.quicSlot] {
                        stream.closed[side.quicSlot] = true
                        events.append(TrafficEvent(time: time, connection: stream.id, kind: .closed(side, .fin)))
                    }
                case .resetStream(let streamID, _, _):
                    if let stream = flow.streams[streamID], !stream.closed[side.quicSlot] {
                        stream.closed[side.quicSlot] = true
                        events.append(TrafficEvent(time: time, connection: stream.id, kind: .closed(side, .reset)))
                    }
                case .ack(let ranges, _, _) where packet.type == .oneRTT || packet.type == .zeroRTT:
                    events += flow.acknowledge(ranges, by: sender, side: side, time: time)
                case .connectionClose:
                    events += flow.cutAcknowledgements(time: time)
                    for stream in flow.streams.values where !stream.closed[side.quicSlot] {
                        stream.closed[side.quicSlot] = true
                        events.append(TrafficEvent(time: time, connection: stream.id, kind: .closed(side, .reset)))
                    }
                default:
                    break
                }
            }
            if !carried.isEmpty { flow.track(packet.number, carried: carried, from: sender) }
        }
        return events
    }

    // MARK: writes: what the proxy handed the receiver

    private func written(_ datagram: [UInt8], to side: Side, flow: QUICFlow, time: Int64) -> [TrafficEvent] {
        guard let packets = flow.recall(datagram) else {
            flow.unrecalled(datagram, to: side)
            return []
        }
        cachedBytes -= datagram.count
        liveCached -= 1
        let sender: QUICSender = side == .client ? .server : .client
        var events: [TrafficEvent] = []
        for packet in packets {
            for case .stream(let streamID, let offset, let data, _) in packet.frames {
                guard let stream = flow.streams[streamID] else { continue }
                let fresh = stream.direction(from: sender).written.add(offset: offset, data: data, fin: false)
                if !fresh.isEmpty {
                    flow.path.delivered(at: time)
                    events.append(TrafficEvent(time: time, connection: stream.id, kind: .written(side, fresh)))
                }
            }
        }
        return events
    }
}

/// One QUIC flow: its decoder, its streams, the packets whose stream bytes await an ACK, and the datagrams it read.
final class QUICFlow {
    /// The flow's connection (the proxy's or the capture's).
    let id: ConnectionID
    let endpoints: ConnectionEndpoints
    var decoder: QUICConnectionDecoder
    var streams: [UInt64: QUICStreamState] = [:]
    /// What its path did: changes, answers, the stall across them.
    var path = QUICPathWatch()
    /// Per sender: packet number → the stream bytes it carried.
    private var inFlight: [QUICSender: [UInt64: [(stream: UInt64, range: Range<UInt64>)]]] = [.client: [:], .server: [:]]
    private var inFlightOrder: [QUICSender: [UInt64]] = [.client: [], .server: []]
    /// Datagrams read whose packets carry stream bytes, until they are written (or dropped from the cache).
    private var recent: [[UInt8]: [QUICPacketRecord]] = [:]
    /// The bytes and count of those.
    private(set) var keptBytes = 0
    var keptCount: Int { recent.count }

    init(id: ConnectionID, endpoints: ConnectionEndpoints, decoder: QUICConnectionDecoder) {
        self.id = id
        self.endpoints = endpoints
        self.decoder = decoder
    }

    /// The stream `id`, made (and its connection opened) at its first frame.
    func stream(_ id: UInt64, opened events: inout [TrafficEvent], time: Int64, newID: () -> ConnectionID) -> QUICStreamState {
        if let stream = streams[id] { return stream }
        let stream = QUICStreamState(id: newID())
        streams[id] = stream
        events.append(TrafficEvent(time: time, connection: stream.id, kind: .opened(endpoints)))
        return stream
    }

    func track(_ number: UInt64, carried: [(stream: UInt64, range: Range<UInt64>)], from sender: QUICSender) {
        if inFlight[sender]![number] == nil { inFlightOrder[sender]!.append(number) }
        inFlight[sender]![number, default: []] += carried
        if inFlightOrder[sender]!.count > QUICStreamEvents.trackedPackets {
            inFlight[sender]![inFlightOrder[sender]!.removeFirst()] = nil
        }
    }

    /// `acker`'s ACK frame: the stream bytes of the acknowledged packets its peer sent; each stream's acknowledged
    /// offset moves to the first byte still not covered.
    func acknowledge(_ ranges: [ClosedRange<UInt64>], by acker: QUICSender, side: Side, time: Int64) -> [TrafficEvent] {
        let sender = acker.other
        var touched: Set<UInt64> = []
        let waiting = inFlight[sender]!
        // Whichever is fewer: the numbers the ranges name, or the packets waiting.
        let named = ranges.reduce(UInt64(0)) { $0 &+ UInt64($1.count) }
        let acknowledged: [UInt64] =
            named <= UInt64(waiting.count)
            ? ranges.flatMap { range in range.filter { waiting[$0] != nil } }
            : waiting.keys.filter { number in ranges.contains { $0.contains(number) } }
        for number in acknowledged {
            guard let carried = waiting[number] else { continue }
            for piece in carried {
                streams[piece.stream]?.direction(from: sender).acknowledged.insert(piece.range)
                touched.insert(piece.stream)
            }
            inFlight[sender]![number] = nil
        }
        inFlightOrder[sender]!.removeAll { inFlight[sender]![$0] == nil }
        var events: [TrafficEvent] = []
        for streamID in touched.sorted() {
            guard let stream = streams[streamID] else { continue }
            let direction = stream.direction(from: sender)
            let upTo = min(direction.acknowledged.prefix, direction.written.contiguous)
            if upTo > direction.reportedAcknowledged {
                direction.reportedAcknowledged = upTo
                events.append(TrafficEvent(time: time, connection: stream.id, kind: .acknowledged(side, upTo: Int64(upTo))))
            }
        }
        return events
    }

    /// The proxy moved the flow to a new upstream socket: the server's acknowledgements of the stream bytes written to
    /// it so far go to the old one from now on, unless the server migrates.
    func markRebound() {
        for stream in streams.values {
            let toServer = stream.direction(from: .client)
            toServer.writtenAtRebound = toServer.written.contiguous
        }
    }

    /// The connection ends: the stream bytes written to the server before the flow's last move whose acknowledgement
    /// never came (it went to the old socket, and the server never migrated to send it again) can no longer be
    /// acknowledged, which the audit counts unconfirmed rather than lost (what the server read of them, its own log
    /// knows; no packet the proxy saw does).
    func cutAcknowledgements(time: Int64) -> [TrafficEvent] {
        var events: [TrafficEvent] = []
        for (_, stream) in streams.sorted(by: { $0.key < $1.key }) {
            let toServer = stream.direction(from: .client)
            guard toServer.writtenAtRebound > toServer.reportedAcknowledged else { continue }
            let upTo = Int64(toServer.writtenAtRebound)
            toServer.writtenAtRebound = 0
            events.append(TrafficEvent(time: time, connection: stream.id, kind: .path(.acknowledgementsCut(.server, upTo: upTo))))
        }
        return events
    }

    /// Keeps `packets` (those that carry stream bytes) for the write of `datagram`; whether it is a new entry.
    func remember(_ datagram: [UInt8], packets: [QUICPacketRecord]) -> Bool {
        guard packets.contains(where: { $0.frames.contains { if case .stream = $0 { true } else { false } } }) else { return false }
        let isNew = recent[datagram] == nil
        recent[datagram, default: []] += packets
        if isNew { keptBytes += datagram.count }
        return isNew
    }

    /// The packets of `datagram`, now written: forgotten (a copy written again, a duplicate, adds nothing).
    func recall(_ datagram: [UInt8]) -> [QUICPacketRecord]? {
        guard let packets = recent.removeValue(forKey: datagram) else { return nil }
        keptBytes -= datagram.count
        return packets
    }

    /// Drops a datagram kept too long (a fault dropped it: it is never written); whether it was kept.
    func drop(_ datagram: [UInt8]) -> Bool { recall(datagram) != nil }

    /// Whether `datagram` is kept.
    func keeps(_ datagram: [UInt8]) -> Bool { recent[datagram] != nil }

    /// Datagrams passed on before any of their packets could be opened (their keys came later), by their receiver.
    private var passedOnEarly: [[UInt8]: Side] = [:]
    private var passedOnEarlyOrder: [[UInt8]] = []

    /// `datagram` was passed on to `side` before it could be read.
    func unrecalled(_ datagram: [UInt8], to side: Side) {
        guard decoder.awaitingKeys > 0, passedOnEarly[datagram] == nil else { return }
        passedOnEarly[datagram] = side
        passedOnEarlyOrder.append(datagram)
        if passedOnEarlyOrder.count > QUICDecoderLimits.awaitingDatagrams { passedOnEarly[passedOnEarlyOrder.removeFirst()] = nil }
    }

    /// The receiver `datagram` was passed on to before it could be read, once (nil: not so).
    func passedOnUnrecalled(_ datagram: [UInt8]) -> Side? {
        passedOnEarly.removeValue(forKey: datagram)
    }
}

/// One QUIC stream of a flow: a connection of the audit's, each direction's bytes as sent, written and acknowledged.
final class QUICStreamState {
    let id: ConnectionID
    /// By ``Side/slot``: that side's direction ended.
    var closed = [false, false]
    private let directions = [QUICStreamDirection(), QUICStreamDirection()]

    init(id: ConnectionID) { self.id = id }

    /// The bytes `sender` sends on it.
    func direction(from sender: QUICSender) -> QUICStreamDirection { directions[sender.rawValue] }
}

/// One direction of a stream.
final class QUICStreamDirection {
    var sent = QUICStreamReassembly()
    var written = QUICStreamReassembly()
    var acknowledged = QUICRangeSet()
    var reportedAcknowledged: UInt64 = 0
    /// The bytes written before the flow's last move, while their acknowledgement may be lost with the old path (0
    /// once told).
    var writtenAtRebound: UInt64 = 0
}

/// A stream's bytes put back in offset order: what is contiguous from 0 is handed on once; pieces past a gap wait
/// (bounded: a piece more than ``window`` past the contiguous end is dropped, as a receiver's flow control would).
struct QUICStreamReassembly {
    static let window: UInt64 = 16 << 20
    private(set) var contiguous: UInt64 = 0
    private var waiting: [UInt64: [UInt8]] = [:]
    private var finalSize: UInt64?

    /// Whether every byte up to the FIN came.
    var isFinished: Bool { finalSize == contiguous }

    /// Adds a piece; returns the bytes that became contiguous.
    mutating func add(offset: UInt64, data: [UInt8], fin: Bool) -> [UInt8] {
        let end = offset + UInt64(data.count)
        if fin { finalSize = end }
        guard end > contiguous, offset <= contiguous + Self.window else { return [] }
        if offset > contiguous {
            if (waiting[offset]?.count ?? 0) < data.count { waiting[offset] = data }
            return []
        }
        var fresh = Array(data.dropFirst(Int(contiguous - offset)))
        contiguous = end
        while let next = waiting.keys.filter({ $0 <= contiguous }).min() {
            let piece = waiting.removeValue(forKey: next)!
            let pieceEnd = next + UInt64(piece.count)
            if pieceEnd > contiguous {
                fresh += piece.dropFirst(Int(contiguous - next))
                contiguous = pieceEnd
            }
        }
        return fresh
    }
}

/// Byte ranges a receiver acknowledged, merged; `prefix` is where the first gap starts.
struct QUICRangeSet {
    private(set) var ranges: [Range<UInt64>] = []

    var prefix: UInt64 { ranges.first.map { $0.lowerBound == 0 ? $0.upperBound : 0 } ?? 0 }

    mutating func insert(_ range: Range<UInt64>) {
        guard !range.isEmpty else { return }
        var merged = range
        var kept: [Range<UInt64>] = []
        for existing in ranges {
            if existing.upperBound < merged.lowerBound || existing.lowerBound > merged.upperBound {
                kept.append(existing)
            } else {
                merged = min(existing.lowerBound, merged.lowerBound)..<max(existing.upperBound, merged.upperBound)
            }
        }
        kept.append(merged)
        ranges = kept.sorted { $0.lowerBound < $1.lowerBound }
    }
}

extension Side {
    /// The index of a per-side array: the client's first.
    fileprivate var quicSlot: Int { self == .client ? 0 : 1 }
}

/// How many datagrams passed on before their keys came a flow remembers.
enum QUICDecoderLimits {
    static let awaitingDatagrams = 256
}
