/// How fast the pair recovered from faults (PRODUCT §4 "also measured").
package struct RecoverySummary: Sendable, Codable, Equatable {
    /// Per disruptive fault: from the disruption (the first connection it closed, or the first refused
    /// attempt) to the next accepted connection.
    package var reconnectS = LatencySummary()
    /// Per fault and affected stream: from the disruption to the first new message delivered on that stream.
    package var resumeS = LatencySummary()
    /// Per message: from the proxy reading it to the consumer's TCP acknowledging it.
    package var transitS = LatencySummary()
    /// Per connection caught in a half-open partition (or a handoff's half-open server leg): how long until
    /// the pair itself closed it.
    package var halfOpenS = LatencySummary()
    /// Streams that a fault interrupted and that never delivered a new message afterwards.
    package var neverResumed = 0
    /// Per partition / handoff / stall: how many connections it caught and how many the pair noticed.
    package var halfOpen: [HalfOpenRecord] = []
    /// Per mass disconnect (two or more connections closed): how reconnect attempts spread out.
    package var reconnectSpread: [ReconnectSpread] = []
    /// The fastest the pair noticed a connection half-open in a partition or stall in this run, in seconds: the
    /// detection window its heartbeat (interval + timeout) allows, as measured. Nil: it noticed none.
    package var noticedWithinS: Double?

    /// Empty.
    package init() {}

    /// The half-open records the pair should have noticed and did not: connections left unnoticed for at least the
    /// detection window its own heartbeat showed elsewhere in the run (all of them when it never noticed one). A
    /// stall shorter than that window is one no heartbeat of this pair could catch, and is not held against it.
    package var missedHalfOpens: [HalfOpenRecord] {
        halfOpen.filter { record in
            record.unnoticed > 0 && noticedWithinS.map { record.longestS >= $0 } ?? true
        }
    }
}

/// How one half-open partition (or handoff) was noticed by the pair.
package struct HalfOpenRecord: Sendable, Codable, Equatable {
    /// The fault occurrence index.
    package var occurrence: Int
    /// The fault kind.
    package var kind: String
    /// Connections alive when it started.
    package var connections: Int
    /// Connections the pair closed by itself (a heartbeat noticed).
    package var noticed: Int
    /// Connections still open when the record was closed: the pair never noticed.
    package var unnoticed: Int
    /// The longest time until the pair noticed, in seconds (or until the record was closed, when unnoticed).
    package var longestS: Double

    /// Creates a record.
    package init(occurrence: Int, kind: String, connections: Int, noticed: Int, unnoticed: Int, longestS: Double) {
        self.occurrence = occurrence
        self.kind = kind
        self.connections = connections
        self.noticed = noticed
        self.unnoticed = unnoticed
        self.longestS = longestS
    }
}

/// How the reconnect attempts after one mass disconnect spread out in time.
package struct ReconnectSpread: Sendable, Codable, Equatable {
    /// The fault occurrence index.
    package var occurrence: Int
    /// The fault kind.
    package var kind: String
    /// Connections it closed.
    package var connectionsClosed: Int
    /// Connection attempts (accepted + refused) in the window after it.
    package var attempts: Int
    /// From the disruption to the first attempt, in seconds.
    package var firstS: Double
    /// From the first to the last attempt, in seconds.
    package var spreadS: Double
    /// The most attempts inside any one ``window`` of time.
    package var densest: Int
    /// The window used for ``densest``, in seconds.
    package var windowS: Double
    /// A thundering herd: most attempts fell inside one short window.
    package var herd: Bool

    /// Creates a record.
    package init(
        occurrence: Int,
        kind: String,
        connectionsClosed: Int,
        attempts: Int,
        firstS: Double,
        spreadS: Double,
        densest: Int,
        windowS: Double,
        herd: Bool
    ) {
        self.occurrence = occurrence
        self.kind = kind
        self.connectionsClosed = connectionsClosed
        self.attempts = attempts
        self.firstS = firstS
        self.spreadS = spreadS
        self.densest = densest
        self.windowS = windowS
        self.herd = herd
    }
}

/// What one fault did to the connections and streams.
package struct FaultImpact: Sendable, Codable, Equatable {
    /// The occurrence index in the timeline.
    package var occurrence: Int
    /// The fault kind.
    package var kind: String
    /// When it started, in seconds.
    package var atS: Double
    /// How long it lasted, in seconds (0 while still active).
    package var forS: Double
    /// Connections closed because of it (by the proxy or by the pair reacting to it).
    package var connectionsClosed: Int
    /// Time to the next accepted connection, in seconds.
    package var reconnectS: Double?
    /// The slowest stream's time to its first new message, in seconds.
    package var resumeS: Double?
    /// Streams it interrupted.
    package var streamsAffected: Int
    /// Streams it interrupted that never resumed.
    package var neverResumed: Int
    /// For a fault or toxic added through the control API (not in the timeline): what it was.
    package var detail: String?
    /// What the ends' TCPs met on the connections it made dead (nil: it made none dead).
    package var deadPath: DeadPathFigures? = nil

    /// Creates an impact record.
    package init(
        occurrence: Int,
        kind: String,
        atS: Double,
        forS: Double = 0,
        connectionsClosed: Int = 0,
        reconnectS: Double? = nil,
        resumeS: Double? = nil,
        streamsAffected: Int = 0,
        neverResumed: Int = 0,
        detail: String? = nil
    ) {
        self.detail = detail
        self.occurrence = occurrence
        self.kind = kind
        self.atS = atS
        self.forS = forS
        self.connectionsClosed = connectionsClosed
        self.reconnectS = reconnectS
        self.resumeS = resumeS
        self.streamsAffected = streamsAffected
        self.neverResumed = neverResumed
    }
}
