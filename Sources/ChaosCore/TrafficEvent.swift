/// A number naming one proxied (or captured) TCP connection pair, unique within a run.
package typealias ConnectionID = UInt64

/// One thing that happened to the traffic: the single seam between where bytes come from (the live
/// proxy or a capture file) and what they mean (the audit).
///
/// Times are monotonic nanoseconds since the start of the run (or of the capture). For a live proxy,
/// `read` is "sent" (the proxy read it from the producer), `written` is what the proxy wrote to the
/// consumer's socket, and `acknowledged` is how much of that the consumer's TCP has acknowledged: a
/// message is "delivered" once its last byte is acknowledged. A capture knows only what crossed the
/// wire, so it reports each payload as both `read` and `written` at the time it was seen, and the
/// receiver's ACK segments as `acknowledged`.
package struct TrafficEvent: Hashable, Sendable {
    /// Nanoseconds since the run started.
    package var time: Int64
    /// The connection this is about; 0 for run-wide events (faults not bound to a connection).
    package var connection: ConnectionID
    /// What happened.
    package var kind: Kind

    /// Creates an event.
    package init(time: Int64, connection: ConnectionID, kind: Kind) {
        self.time = time
        self.connection = connection
        self.kind = kind
    }

    /// What happened.
    package enum Kind: Hashable, Sendable {
        /// A client connected and the proxy (or the capture) saw both legs established.
        case opened(ConnectionEndpoints)
        /// A client connection was refused (a `refuse` fault, or the upstream could not be reached).
        case refused(proxy: String, reason: String)
        /// Bytes read from `side` (for the audit: "sent" by that side).
        case read(Side, [UInt8])
        /// Bytes written to `side` (handed to its socket; delivered once `acknowledged`).
        case written(Side, [UInt8])
        /// `side`'s TCP has acknowledged the first `upTo` bytes written to it on this connection
        /// (cumulative: it only grows). Bytes written and never acknowledged were not delivered.
        case acknowledged(Side, upTo: Int64)
        /// `side` had already ended its TLS session (sent close_notify) when these bytes were written to it, and its
        /// TCP acknowledged them up to `upTo` (cumulative, like `acknowledged`). Whether its application read them
        /// depends on its TLS stack (some read after their own close_notify, some drop), so a message they carry
        /// counts delivered only if the consumer's own acknowledgements (the protocol's `ack` field) cover it later.
        case acknowledgedAfterClose(Side, upTo: Int64)
        /// `side` stopped sending: its leg was closed `how`.
        case closed(Side, CloseKind)
        /// A fault began; `connection` is 0 when it is run-wide.
        case faultStarted(FaultMark)
        /// A fault ended.
        case faultEnded(FaultMark)
        /// The run is ending and the pair is being stopped: closes after this are the run's own
        /// doing, not a fault's (run-wide, connection 0).
        case stopping
        /// What the emulated mobile path did to this connection (a radio promotion, a NAT that forgot it, a lost
        /// packet's retransmission): the proxy's own doing, which no capture shows.
        case path(PathEvent)
        /// What the connection's TLS said, as a capture's decryption read it (``TLSNote``).
        case tls(TLSNote)
    }

    /// What a capture's TLS decryption learnt of a connection.
    package enum TLSNote: Hashable, Sendable {
        /// The handshake chose `alpn` (nil: no ALPN), with the protocol `version` (`TLS 1.3`) and cipher `suite`
        /// (`TLS_AES_128_GCM_SHA256`). Comes before the connection's first decrypted byte.
        case negotiated(alpn: String?, version: String, suite: String)
        /// The conversation could not be (or no longer can be) decrypted: why, naming the record. The bytes it
        /// concerns are not audited.
        case problem(String)
    }

    /// What the emulated mobile path did to a connection (PRODUCT §11).
    package enum PathEvent: Hashable, Sendable {
        /// Its bytes waited `waited` nanoseconds for the radio to come out of idle (an RRC promotion).
        case radioPromotion(waited: Int64)
        /// The NAT forgot it: no byte either way for `idleTimeout` nanoseconds (it expired `idleTimeout` after its last
        /// byte, `idleFor` before this event). From now on nothing passes either way and neither side is told.
        case natExpired(idleTimeout: Int64, idleFor: Int64)
        /// A piece travelling `direction` was lost and arrives `delay` nanoseconds late (its retransmission timeouts).
        case retransmission(Direction, delay: Int64)
        /// A UDP flow continues from a new upstream-facing socket (a `rebind`, a `handoff`): the server sees its peer
        /// at a new address, which a QUIC connection's path watch judges.
        case rebound
        /// No acknowledgement of the first `upTo` bytes written to `side` can come any more: the proxy moved the flow
        /// (``rebound``) after writing them, so `side`'s acknowledgements went to a socket the proxy no longer has, and
        /// the connection ended before any came by the new one (a QUIC stream of a connection that died on the move);
        /// or `side`'s peer reset its TCP leg with no FIN first, and these bytes went out to it (its kernel took them
        /// ahead of its RST, which no TCP counts as an acknowledgement).
        /// What `side` took of them no one can confirm or deny: unconfirmed, unless a later delivery or the consumer's
        /// own ack settles them.
        case acknowledgementsCut(Side, upTo: Int64)
        /// The connection's path was dead and now is not (or the connection ended while it was): what each end's TCP met
        /// meanwhile.
        case deadPathSeen(DeadPathSeen)
    }

    /// How one leg of a connection ended.
    package enum CloseKind: String, Hashable, Sendable, Codable {
        /// Orderly: FIN (a half-close; the other direction may keep flowing).
        case fin
        /// Abortive: RST.
        case reset
        /// The proxy closed it because of a fault, with a FIN (a `close` or `truncate` cut).
        case cutByFault = "cut-by-fault"
        /// The proxy reset it because of a fault (a `reset` cut, a one-sided cut, a cut's linger that ran out).
        case resetByFault = "reset-by-fault"
        /// A capture's RST that the proxy sent on the leg (a fault's cut, a linger that ran out, the run's end, or the
        /// other leg's reset passed on), as opposed to `reset`, the peer's own. The live proxy never records it: it
        /// knows its reasons (`cutByFault`, or `reset` for one passed on).
        case resetByProxy = "reset-by-proxy"
        /// A socket error.
        case error

        /// The proxy ended the leg because of a fault (either way).
        package var isFaultCut: Bool { self == .cutByFault || self == .resetByFault }

        /// The leg ended abortively, whoever sent the RST: what its peer's TCP took may never have been read.
        package var isAbortive: Bool { self == .reset || self == .resetByFault || self == .resetByProxy || self == .error }
    }
}

/// Names one fault occurrence of the timeline in the event stream.
package struct FaultMark: Hashable, Sendable, Codable {
    /// The fault kind, as the scenario spells it (`disconnect`, `latency`, …).
    package var kind: String
    /// The index of the occurrence in the timeline.
    package var occurrence: Int
    /// A short human summary of the drawn parameters (`mode=reset`, `add=512ms`).
    package var detail: String
    /// Only this proxy's connections (a fault scoped with `proxy:`, a toxic); nil: every proxy's.
    package var proxy: String? = nil
    /// Only these of the connections live when it began (`targets: {count: N}` or `{fraction: F}` picked them); nil:
    /// every connection in its scope.
    package var connections: [ConnectionID]? = nil
    /// Only the connections this draw reaches (`targets: {each: P}`); nil: every connection in its scope.
    package var draw: ConnectionDraw? = nil

    /// Whether it was aimed at connection `id` (on the proxy it was scoped to, if any: the caller checks that).
    package func reaches(_ id: ConnectionID) -> Bool {
        (connections?.contains(id) ?? true) && (draw?.reaches(id) ?? true)
    }

    /// The occurrence number of what the control API added (its fault or toxic `id`, and the occurrence's
    /// `index` in that fault's own timeline): `id << 40 + index`, apart from any run timeline's indexes.
    package static func apiOccurrence(id: Int, index: Int) -> Int { (id << 40) + index }

    /// Whether it marks what the control API added (see ``apiOccurrence(id:index:)``).
    package var addedThroughAPI: Bool { occurrence >= 1 << 40 }

    /// Creates a mark (of a fault on `proxy` alone, or on every proxy; on the given `connections` or those `draw`
    /// reaches, or on all of them).
    package init(
        kind: String,
        occurrence: Int,
        detail: String,
        proxy: String? = nil,
        connections: [ConnectionID]? = nil,
        draw: ConnectionDraw? = nil
    ) {
        self.kind = kind
        self.occurrence = occurrence
        self.detail = detail
        self.proxy = proxy
        self.connections = connections
        self.draw = draw
    }
}

/// The four addresses of a proxied connection (`host:port` text). A capture of traffic that did
/// not go through a proxy has one leg only: then `listen` is the server and `proxyLocal` the client.
package struct ConnectionEndpoints: Hashable, Sendable, Codable {
    /// The proxy's name (or `capture`).
    package var proxy: String
    /// The client's address (client leg, remote end).
    package var client: String
    /// The proxy's listen address (client leg, local end).
    package var listen: String
    /// The proxy's own address on the server leg (local end).
    package var proxyLocal: String
    /// The server's address (server leg, remote end).
    package var server: String

    /// No proxy between the two ends (a capture of the pair's own connection): the client's connection is the
    /// server's, so a reset either end sends reaches the other.
    package var isDirect: Bool { listen == server && proxyLocal == client }

    /// Creates the endpoints of a connection.
    package init(proxy: String, client: String, listen: String, proxyLocal: String, server: String) {
        self.proxy = proxy
        self.client = client
        self.listen = listen
        self.proxyLocal = proxyLocal
        self.server = server
    }
}

extension TrafficEvent {
    /// What holding this event in memory costs a bounded hand-over (the audit's queue, the pipelined capture reader):
    /// its payload's buffer (its capacity: a relay's read is handed over in the array it was read into) and a fixed
    /// part for the event itself.
    package var queuedBytes: Int {
        switch kind {
        case .read(_, let bytes), .written(_, let bytes): 64 + bytes.capacity
        default: 64
        }
    }
}
