package import ChaosCore

/// One thing that went wrong, with when, where and which fault was active.
package struct Anomaly: Sendable, Codable, Equatable {
    /// What kind of anomaly.
    package enum Class: String, Sendable, Codable, CaseIterable {
        /// A jump in the delivered sequence (`fromSeq...toSeq` were skipped).
        case gap
        /// Seqs never delivered by the end of the run.
        case lost
        /// A seq delivered again on the same connection.
        case duplicated
        /// A seq delivered again on a later connection.
        case redelivered
        /// A seq first delivered after a higher one.
        case reordered
        /// A frame cut in half when its connection ended.
        case truncated
        /// The bytes do not fit the declared framing (reported once per connection).
        case framing
        /// A frame that could not be read in the declared format (reported once per connection).
        case undecodable
        /// Messages counted as delivered without their consumer's TCP acknowledgement (reported once per connection).
        case unconfirmed
        /// A seq absurdly far past the highest of its stream (reported once per stream; such messages are not audited).
        case seqJump = "seq jump"
        /// Bytes that do not parse as the declared protocol (a bad frame or handshake): the offset and
        /// reason are in the detail; that direction of the connection is not audited further (reported once per connection).
        case protocolError = "protocol"
        /// A message larger than `protocol.max_message`: counted, not audited (reported once per connection).
        case oversized
        /// A TLS handshake that failed: a client that rejected chaos's certificate (the alert, its SNI and address,
        /// and how to trust chaos's CA), or an upstream whose certificate failed verification.
        case tls
    }

    /// What kind of anomaly (`class` in JSON).
    package var kind: Class
    /// The logical stream ("" when unknown).
    package var stream: String
    /// Which way the messages travel.
    package var direction: Direction
    /// The receiver whose copy of the stream it concerns (a subscriber's client id), if the stream has several.
    package var receiver: String?
    /// The first seq concerned.
    package var fromSeq: Int64?
    /// The last seq concerned.
    package var toSeq: Int64?
    /// When, in seconds since the start of the run.
    package var atS: Double
    /// The connection it was seen on (0 when not bound to one).
    package var connection: UInt64
    /// The kind of the fault active then, or of the last fault before it when none was active.
    package var fault: String?
    /// That fault's occurrence index in the timeline.
    package var faultOccurrence: Int?
    /// Whether that fault was still active (false: the anomaly came after it).
    package var faultActive: Bool?
    /// A human detail (a byte snippet for undecodable frames, the framing problem…).
    package var detail: String?

    /// Creates an anomaly.
    package init(
        kind: Class,
        stream: String,
        direction: Direction,
        fromSeq: Int64? = nil,
        toSeq: Int64? = nil,
        atS: Double,
        connection: UInt64,
        fault: String? = nil,
        faultOccurrence: Int? = nil,
        faultActive: Bool? = nil,
        detail: String? = nil
    ) {
        self.kind = kind
        self.stream = stream
        self.direction = direction
        self.fromSeq = fromSeq
        self.toSeq = toSeq
        self.atS = atS
        self.connection = connection
        self.fault = fault
        self.faultOccurrence = faultOccurrence
        self.faultActive = faultActive
        self.detail = detail
    }

    private enum CodingKeys: String, CodingKey {
        case kind = "class"
        case stream, direction, receiver, fromSeq, toSeq, atS, connection, fault, faultOccurrence, faultActive, detail
    }
}
