/// What the emulated mobile path did (PRODUCT §11): radio promotions, connections a NAT forgot and whether the pair
/// noticed, retransmission stalls, and the pair's keepalive next to the NAT timeout and the radio tail, with findings.
package struct PathSummary: Sendable, Codable, Equatable {
    /// Promotions the pair's bytes waited for (each counted once per connection that waited).
    package var radioPromotions = 0
    /// The time those bytes waited, summed over connections, in seconds.
    package var radioPromotionS = 0.0
    /// Connections a NAT forgot (no byte either way for its idle timeout) that then tried to talk.
    package var natExpired = 0
    /// Of those, connections the pair itself closed before the run stopped.
    package var natNoticed = 0
    /// From the NAT forgetting a connection to the pair closing it.
    package var natNoticedS = LatencySummary()
    /// Lost pieces that arrived late.
    package var retransmissions = 0
    /// Their delays, summed, in seconds.
    package var retransmissionStallS = 0.0
    /// Per connection: its longest time with no byte either way (the pair's effective keepalive interval).
    package var quietGapS = LatencySummary()
    /// Per connection: the longest time between two of its audited messages (followed under a radio only).
    package var messageGapS = LatencySummary()
    /// The NAT idle timeout in force, in seconds (nil: none).
    package var natIdleTimeoutS: Double?
    /// The radio tail in force, in seconds (nil: no radio).
    package var radioTailS: Double?
    /// Per connection the path touched, the first ``PathSummary/connectionLimit``.
    package var connections: [PathConnectionRecord] = []
    /// One line each: what a user should change (a keepalive longer than the NAT timeout, one that keeps the radio
    /// awake).
    package var findings: [String] = []

    /// The most connections listed one by one.
    package static let connectionLimit = 100

    /// Empty.
    package init() {}
}

/// What the mobile path did to one connection.
package struct PathConnectionRecord: Sendable, Codable, Equatable {
    /// The connection.
    package var connection: UInt64
    /// Radio promotions its bytes waited for.
    package var radioPromotions = 0
    /// How long they waited in all, in seconds.
    package var radioPromotionS = 0.0
    /// Retransmission stalls (lost pieces that arrived late).
    package var retransmissions = 0
    /// Their delays summed, in seconds.
    package var retransmissionStallS = 0.0
    /// When a NAT forgot it (seconds since the start); nil: none did.
    package var natExpiredAtS: Double?
    /// How long after that the pair closed it (nil: it never did before the run stopped).
    package var natNoticedAfterS: Double?

    /// A record for `connection`.
    package init(connection: UInt64) { self.connection = connection }
}

/// The limits a run's mobile path set, which the pair's keepalive is judged against.
package struct PathLimits: Sendable, Equatable {
    /// The shortest NAT idle timeout in force (nanoseconds), nil: none.
    package var natIdleTimeout: Int64?
    /// The radio tail in force (nanoseconds), nil: no radio.
    package var radioTail: Int64?

    /// Limits.
    package init(natIdleTimeout: Int64? = nil, radioTail: Int64? = nil) {
        self.natIdleTimeout = natIdleTimeout
        self.radioTail = radioTail
    }
}
