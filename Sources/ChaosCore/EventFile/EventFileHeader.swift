import Foundation

/// The header of one `events.bin` segment: who wrote it and when its clock started, so that a merge can check that
/// agents ran the same scenario and seed and can put their events on one timeline.
///
/// A segment is the 8-byte magic `CHAOSEVT`, a little-endian `UInt16` format version, a `UInt32` header length, the
/// header as JSON, then records (``EventRecordCoding``), and, when the writer closed it, an end record with the count.
package struct EventFileHeader: Codable, Sendable, Equatable {
    /// The magic bytes that open every segment.
    package static let magic: [UInt8] = Array("CHAOSEVT".utf8)
    /// The format version this build writes and reads.
    package static let version: UInt16 = 1
    /// The largest header a reader accepts.
    package static let largestHeader = 1 << 20

    /// The agent's name (`--agent`).
    package var agent: String
    /// The scenario's name.
    package var scenario: String
    /// A digest of the scenario as run (its JSON), to tell agents that ran different scenarios apart.
    package var scenarioDigest: String
    /// The run's seed.
    package var seed: UInt64
    /// The wall-clock moment of the run clock's zero, in nanoseconds since 1970 (events carry times since then).
    package var startedAtNs: Int64
    /// The host clock's estimated error in microseconds when the run started (the kernel's NTP state; nil: unknown).
    package var clockErrorUs: Int64?
    /// Whether the host clock was synchronised (NTP) when the run started (nil: unknown).
    package var clockSynchronized: Bool?
    /// This segment's number in the agent's ring (0 for the first).
    package var segment: Int

    /// Creates a header.
    package init(
        agent: String,
        scenario: String,
        scenarioDigest: String,
        seed: UInt64,
        startedAtNs: Int64,
        clockErrorUs: Int64? = nil,
        clockSynchronized: Bool? = nil,
        segment: Int = 0
    ) {
        self.agent = agent
        self.scenario = scenario
        self.scenarioDigest = scenarioDigest
        self.seed = seed
        self.startedAtNs = startedAtNs
        self.clockErrorUs = clockErrorUs
        self.clockSynchronized = clockSynchronized
        self.segment = segment
    }

    /// The segment's opening bytes: magic, version, length and this header.
    package func encoded() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let json = [UInt8](try encoder.encode(self))
        var bytes = Self.magic
        withUnsafeBytes(of: Self.version.littleEndian) { bytes += $0 }
        withUnsafeBytes(of: UInt32(json.count).littleEndian) { bytes += $0 }
        return bytes + json
    }
}
