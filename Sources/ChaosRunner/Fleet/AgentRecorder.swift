import ChaosCore
import Crypto
import Foundation
import Synchronization

/// `chaos run --agent NAME`: the agent's traffic events, as the audit took them, in the run folder's `events.bin`
/// ring (``EventFileWriter``), for `chaos report --merge`.
final class AgentRecorder: Sendable {
    private let writer: Mutex<EventFileWriter>
    /// The header every segment opens with.
    let header: EventFileHeader

    /// Opens `events.bin` in `folder` for agent `name` of a run of `scenario` with `seed`, whose clock's zero was
    /// `clockZero`.
    init(
        folder: String,
        agent name: String,
        scenario: Scenario,
        timeline: Timeline,
        fleetSeed: UInt64,
        clockZero: Date,
        ringBytes: Int
    ) throws {
        let clock = HostClock.status()
        let header = EventFileHeader(
            agent: name,
            scenario: scenario.name,
            scenarioDigest: try Self.digest(scenario, timeline),
            seed: fleetSeed,
            startedAtNs: AgentClock.nanoseconds(of: clockZero),
            clockErrorUs: clock.errorUs,
            clockSynchronized: clock.synchronized
        )
        self.header = header
        writer = Mutex(try EventFileWriter(folder: folder, header: header, ringBytes: ringBytes))
    }

    /// SHA-256 of what makes two runs one fleet's: the drawn timeline (under `per-agent`, where each agent draws its own,
    /// the timeline its rules draw from seed 0), the protocol and the expectations (canonical JSON).
    /// Addresses are left out: each host's agent may listen and dial where its host needs (`--set`).
    static func digest(_ scenario: Scenario, _ timeline: Timeline) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var hash = SHA256()
        if scenario.fleet?.schedule == .perAgent {
            hash.update(data: Data("per-agent".utf8))
            hash.update(data: try encoder.encode(Timeline(scenario: scenario, seed: 0, duration: timeline.duration)))
        } else {
            hash.update(data: try encoder.encode(timeline))
        }
        hash.update(data: try encoder.encode(scenario.protocolSpec))
        hash.update(data: try encoder.encode(scenario.expectations))
        return hash.finalize().map { String(format: "%02x", $0) }.joined()
    }

    /// Writes one event (on the audit's thread); what is buffered reaches the file at least once a second, so a
    /// merge fetching `GET /events` during the run sees it.
    func record(_ event: TrafficEvent) {
        let now = DispatchTime.now().uptimeNanoseconds
        writer.withLock { writer in
            writer.write(event)
            if now &- lastFlush.load(ordering: .relaxed) > 1_000_000_000 {
                writer.flush()
                lastFlush.store(now, ordering: .relaxed)
            }
        }
    }

    private let lastFlush = Atomic<UInt64>(DispatchTime.now().uptimeNanoseconds)

    /// Closes the ring (after the audit took the last event); returns facts for the report.
    func close() -> [String: String] {
        writer.withLock { writer in
            writer.close()
            var facts = [
                "agent.events": "\(writer.events)", "agent.event_bytes": "\(writer.bytes)",
                "agent.event_files": writer.paths.map { ($0 as NSString).lastPathComponent }.joined(separator: ", "),
            ]
            if writer.segmentsRemoved > 0 { facts["agent.event_segments_removed"] = "\(writer.segmentsRemoved)" }
            if let failure = writer.failure { facts["agent.events_failed"] = failure }
            return facts
        }
    }
}
