package import ChaosCore
package import ChaosProtocols

/// The audit: reads the ``TrafficEvent`` stream of a run (live from the proxy, or from a capture), frames the
/// bytes, reads each message's stream and seq, and classifies every delivery as PRODUCT §4 defines.
///
/// Feed it every event in time order with ``ingest(_:)`` (the hot path: no allocation per message for
/// NDJSON on one stream per connection), take a ``snapshot()`` whenever a checkpoint is due, and call
/// ``finish()`` once at the end. Not thread-safe: one owner feeds it (an actor, a lock, or one event loop).
///
/// Memory stays bounded on long runs: per stream it keeps range sets (growing with holes, not messages),
/// per connection only while the connection lives, and at most ``anomalyLimit`` anomalies in detail.
package final class AuditEngine {
    /// Anomalies kept in detail; every anomaly is counted regardless.
    package static let anomalyLimit = 1000

    /// When a message written to its consumer counts as delivered.
    package enum DeliveryPoint: Sendable {
        /// Once the consumer's TCP acknowledged its last byte (`acknowledged` events): what a live
        /// proxy and a capture report. Bytes written into a connection the consumer had already
        /// abandoned are never acknowledged, so they are not delivered.
        case acknowledged
        /// As soon as the proxy wrote it (an event stream without acknowledgements).
        case written
    }

    /// The protocol being audited.
    package let spec: ProtocolSpec
    /// When a written message counts as delivered.
    package let deliveryPoint: DeliveryPoint
    /// Every stream's first seq.
    package let seqStart: Int64
    /// Per direction (upstream 0, downstream 1): reads the fields of that direction's messages.
    let extractors: [MessageExtractor]
    /// ``extractors``' two, read per message with no reference counting (the array keeps them).
    unowned(unsafe) let upstreamExtractor: MessageExtractor?
    unowned(unsafe) let downstreamExtractor: MessageExtractor?
    /// A framing with RPCs and a schema: per RPC, the readers of its request (`2i`) and response (`2i + 1`) messages.
    var callReaders: [MessageExtractor?]
    /// A framing with RPCs and a schema: `/package.Service/Method` → its index in ``callReaders`` (halved).
    let callReaderIndex: [String: Int]
    /// Per direction: where the stream name comes from when it is not a field (`header:`, `query:`, `rpc`).
    let handshakeStreamSources: [ProtocolSpec.StreamSource?]
    /// Per direction: whether ``handshakeStreamSources`` names one (read per message: a Bool costs no copy).
    let namesStreamByHandshake: (upstream: Bool, downstream: Bool)
    /// Makes each connection's leg decoders.
    let layer: ProtocolLayer
    var ledgers: [StreamLedger] = []
    var ledgerIndex: [StreamKey: Int] = [:]
    /// Per receiver (a subscriber), the highest seq each stream's producer had delivered when it first
    /// subscribed: its copy of a stream is owed the seqs after that.
    var receiverBaselines: [String: [String: Int64]] = [:]
    var connections: [ConnectionID: ConnectionState] = [:]
    /// Connections seen so far (the last one's ``ConnectionState/order``).
    var connectionsSeen: ConnectionOrder = 0
    /// Connections closed on both sides, oldest first, waiting out ``retireGrace`` before they are dropped.
    var retiring = RetiringQueue()
    /// When the oldest retiring connection is due (kept apart so that the hot path reads one integer).
    var nextRetirement: Int64 = .max
    /// How far past the highest seq of its stream so far a message's seq may be and still be audited.
    package static let seqJumpLimit: Int64 = 1 << 32
    /// How long a connection closed on both sides stays, for writes still under way to it (nanoseconds).
    static let retireGrace: Int64 = 60_000_000_000
    var faults = FaultContext()
    var recovery = RecoveryTracker()
    var anomalies = AnomalyLog(limit: AuditEngine.anomalyLimit)
    var activity = ActivitySeries()
    var transit = LatencyRecorder()
    var connectionStats = ConnectionStats()
    var messageStats = MessageStats()
    var protocolStats = ProtocolStats()
    /// PING round trips: from a PING read from one peer to its ack read from the other.
    var pingRoundTrips = LatencyRecorder()
    /// The time of the latest event.
    package private(set) var now: Int64 = 0
    /// Set by ``finish()``: later events are ignored.
    package private(set) var isFinished = false
    /// The run is stopping (its pair is being stopped): see ``acknowledgedAfterClose(_:by:connection:time:)``.
    var isStopping = false
    /// The mobile path's events per connection, and the quiet gaps that show the pair's keepalive.
    var pathTracker = PathTracker()
    /// The NAT timeout and radio tail the run's mobile path set (the runner's); the pair's keepalive is judged
    /// against them. Nil: judged only if the path's events show them.
    package var pathLimits: PathLimits? {
        didSet { if pathLimits != nil { pathTracker.watching = true } }
    }
    private var finalResult: AuditResult?
    /// A read waiting to see whether the next event writes its very buffer (see ``ingest(_:)``).
    var heldRead: TrafficEvent?

    struct StreamKey: Hashable {
        var name: String
        var direction: Direction
        var receiver: String? = nil
    }

    /// Creates an engine for `spec`; `seqStart` overrides `spec.seqStart`; `deliveryPoint` says when a written
    /// message is delivered. Throws `ChaosError.badInput` for a framing or format the audit cannot read, a bad
    /// regex, or a descriptor set that cannot be read or lacks a named field. `plugin` reads the framing instead of
    /// the registry's plug-in of that name (a plug-in the registry does not list: a test's).
    package init(
        spec: ProtocolSpec,
        seqStart: Int64? = nil,
        deliveryPoint: DeliveryPoint = .acknowledged,
        plugin: (any ProtocolPlugin.Type)? = nil
    ) throws {
        self.spec = spec
        self.deliveryPoint = deliveryPoint
        self.seqStart = seqStart ?? spec.seqStart
        layer = try ProtocolLayer(spec: spec, plugin: plugin)
        let directions = [Direction.upstream, .downstream].map(layer.fieldSpec.resolved(for:))
        // With a descriptor set, the shared readers are never used (each RPC has its own); names are not field numbers.
        extractors = layer.schema == nil ? try directions.map { try MessageExtractor(spec: $0) } : []
        upstreamExtractor = extractors.first
        downstreamExtractor = extractors.last
        (callReaders, callReaderIndex) = try Self.callReaders(spec: spec, layer: layer)
        handshakeStreamSources = directions.map {
            switch $0.streamSource {
            case .header(let name): .header(name)
            case .query(let name): .query(name)
            case .rpc: .rpc
            case .field, nil: nil
            }
        }
        namesStreamByHandshake = (handshakeStreamSources[0] != nil, handshakeStreamSources[1] != nil)
    }

    /// Feeds one event. Events must come in time order.
    ///
    /// A read (framings that audit relayed reads once: ``ProtocolLayer/holdsReads``) is held until the next event: when that is the write of the
    /// same buffer at the same offset (the relay wrote the read whole; a capture's standalone connection), the pair
    /// is audited in one pass (``relayed(_:_:)``). Anything else first audits the held read as it came.
    package func ingest(_ event: TrafficEvent) {
        guard !isFinished else { return }
        if let held = heldRead {
            heldRead = nil
            if relayed(held, event) {
                if event.time > now { now = event.time }
                return
            }
            process(held: held)
        }
        if event.time > now { now = event.time }
        if now > nextRetirement { retireClosedConnections(before: now) }
        if case .read(_, let bytes) = event.kind, layer.holdsReads, !bytes.isEmpty {
            pathTracker.read(on: event.connection, at: event.time)
            heldRead = event
            return
        }
        process(event)
    }

    /// Audits a read held by ``ingest(_:)`` that no write of its own buffer followed (its path tracking is done).
    func process(held event: TrafficEvent) {
        guard case .read(let side, let bytes) = event.kind else { return process(event) }
        feed(bytes, role: .sent, direction: side.producing, connection: event.connection, time: event.time)
    }

    /// Audits any event but a held read.
    private func process(_ event: TrafficEvent) {
        switch event.kind {
        case .read(let side, let bytes):
            pathTracker.read(on: event.connection, at: event.time)
            feed(bytes, role: .sent, direction: side.producing, connection: event.connection, time: event.time)
        case .written(let side, let bytes):
            feed(bytes, role: .delivered, direction: side.other.producing, connection: event.connection, time: event.time)
        case .acknowledged(let side, let offset):
            acknowledged(offset, by: side, connection: event.connection, time: event.time)
        case .acknowledgedAfterClose(let side, let offset):
            acknowledgedAfterClose(offset, by: side, connection: event.connection, time: event.time)
        case .opened(let endpoints):
            connectionStats.opened += 1
            activity.count(.opened, at: event.time)
            let connection = state(of: event.connection)
            connection.direct = endpoints.isDirect
            connection.proxy = endpoints.proxy
            connection.openedAt = event.time
            recovery.opened(at: event.time)
            pathTracker.opened(event.connection, at: event.time)
        case .refused(_, let reason):
            connectionStats.refused += 1
            activity.count(.refused, at: event.time)
            recovery.refused(at: event.time)
            if reason.hasPrefix(TLSSpec.refusalPrefix) {
                protocolStats.tlsFailures += 1
                record(
                    .tls,
                    nil,
                    direction: .upstream,
                    time: event.time,
                    connection: 0,
                    detail: String(reason.dropFirst(TLSSpec.refusalPrefix.count))
                )
            }
        case .closed(let side, let how):
            closed(event.connection, side: side, how: how, time: event.time)
            pathTracker.closed(event.connection, how: how, at: event.time, fully: connections[event.connection]?.fullyClosed ?? true)
        case .faultStarted(let mark):
            faults.started(mark)
            if event.connection == 0 {
                // What a fault can leave half-open: the connections it was aimed at (its proxy's, its targets) that
                // both ends still hold open. One whose end already closed is being torn down, not believed up: its
                // other leg may close only after the fault lifts, as the proxy holds the FIN.
                let live = connections.lazy.filter {
                    !$0.value.clientClosed && !$0.value.serverClosed && (mark.proxy == nil || $0.value.proxy == mark.proxy)
                        && mark.reaches($0.key)
                }.map(\.key)
                recovery.faultStarted(mark, at: event.time, live: live)
            }
        case .faultEnded(let mark):
            faults.ended(mark)
            if event.connection == 0 { recovery.faultEnded(mark, at: event.time) }
        case .stopping:
            isStopping = true
            recovery.stopping(at: event.time)
            pathTracker.stopping(at: event.time)
        case .path(let pathEvent):
            pathTracker.path(pathEvent, on: event.connection, at: event.time)
            if case .natExpired = pathEvent, let connection = connections[event.connection] {
                let carried = connection.streams.flatMap { $0.values.filter(\.carriedTraffic).map(\.ledger) }
                recovery.natExpired(at: event.time, streams: carried.sorted { $0.index < $1.index })
            }
            if case .acknowledgementsCut(let side, let offset) = pathEvent { acknowledgementsCut(offset, to: side, connection: event.connection) }
            if case .deadPathSeen(let seen) = pathEvent { recovery.deadPathSeen(seen, on: event.connection, at: event.time) }
        case .tls(.negotiated(let alpn, _, _)):
            state(of: event.connection).session.negotiated(alpn: alpn)
        case .tls(.problem(let reason)):
            protocolStats.protocolErrors += 1
            record(.protocolError, nil, direction: .upstream, time: event.time, connection: event.connection, detail: reason)
        }
    }

    /// Feeds several events.
    package func ingest(_ events: some Sequence<TrafficEvent>) {
        for event in events { ingest(event) }
    }

    /// Audits the read ``ingest(_:)`` holds, if any (before a snapshot or the end).
    func flushHeldRead() {
        guard let held = heldRead else { return }
        heldRead = nil
        process(held: held)
    }

    /// The result so far, without changing any state (for the minute checkpoint). Seqs still in flight on live
    /// connections are not counted as lost yet.
    package func snapshot() -> AuditResult {
        if let finalResult { return finalResult }
        flushHeldRead()
        return result(final: false)
    }

    /// Ends the audit: every live connection is closed (a partial frame counts as truncated, seqs in flight
    /// count as lost), every open recovery measurement is closed, and the final result is returned.
    /// Calling it again returns the same result.
    @discardableResult
    package func finish() -> AuditResult {
        if let finalResult { return finalResult }
        flushHeldRead()
        for id in connections.keys.sorted() {
            guard let connection = connections[id] else { continue }
            if !connection.clientClosed { closed(id, side: .client, how: .fin, time: now, synthetic: true) }
            if !connection.serverClosed { closed(id, side: .server, how: .fin, time: now, synthetic: true) }
            for end in Side.allCases { endDeliveries(toward: end, of: connection, how: .fin, time: now) }
        }
        retiring.removeAll()
        nextRetirement = .max
        recovery.advance(to: now)
        let result = result(final: true)
        for ledger in ledgers { ledger.resumeWaits = [] }
        isFinished = true
        finalResult = result
        return result
    }

    func state(of id: ConnectionID) -> ConnectionState {
        if let existing = connections[id] { return existing }
        connectionsSeen += 1
        let created = ConnectionState(id: id, order: connectionsSeen, layer: layer)
        connections[id] = created
        return created
    }

    func label(_ anomaly: inout Anomaly) {
        guard let fault = faults.label else { return }
        anomaly.fault = fault.kind
        anomaly.faultOccurrence = fault.occurrence
        anomaly.faultActive = fault.active
    }

    func record(
        _ kind: Anomaly.Class,
        _ ledger: StreamLedger?,
        direction: Direction,
        from: Int64? = nil,
        to: Int64? = nil,
        time: Int64,
        connection: ConnectionID,
        detail: String? = nil
    ) {
        anomalies.add(
            {
                var anomaly = Anomaly(
                    kind: kind,
                    stream: ledger?.name ?? "",
                    direction: ledger?.direction ?? direction,
                    fromSeq: from,
                    toSeq: to,
                    atS: Double(time) / 1e9,
                    connection: connection,
                    detail: detail
                )
                anomaly.receiver = ledger?.receiver
                label(&anomaly)
                return anomaly
            }(),
            kind: kind
        )
    }
}
