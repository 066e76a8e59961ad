public import ChaosCore
import Foundation

/// Writes the proxied traffic of a run as a pcap file that Wireshark and tshark read as real TCP
/// conversations: it consumes the live `TrafficEvent` stream and synthesizes both legs of every
/// connection (client ↔ listen and proxyLocal ↔ server) with handshakes, sequence and
/// acknowledgement numbers, FIN and RST, and correct IP and TCP checksums.
///
/// Mapping: `.read(.client, b)` is client→listen data, `.written(.server, b)` proxyLocal→server,
/// `.read(.server, b)` server→proxyLocal, `.written(.client, b)` listen→client. `.closed(side, .fin)`
/// is a FIN from that side's peer, propagated as a FIN from the proxy on the other leg (the relay
/// half-closes); `.reset` and `.error` are an RST from the peer; `.cutByFault` an RST from the proxy.
///
/// The file has link type RAW (IPv4/IPv6, no link header) and nanosecond timestamps
/// (`startedAt` + the event's time). Packets are buffered and flushed about once a second of event
/// time and on ``flush()`` / ``close()``.
///
/// Thread-safe: every method takes one lock, so several producers may share a writer; one serial
/// consumer is the cheapest use.
public final class CaptureWriter: @unchecked Sendable {
    // @unchecked Sendable: all mutable state below is only touched while `lock` is held (every
    // public method and property takes it), and the libpcap handles never leave this object.
    private let lock = NSLock()
    let files: CaptureFileSet
    let startedAtNanoseconds: Int64
    var builder = PacketBuilder()
    var connections: [ConnectionID: SynthesizedConnection] = [:]
    /// Connections closed both ways that still wait for their peers' last acknowledgements, oldest first.
    var lingeringOrder: [ConnectionID] = []
    /// The most such connections kept.
    static let lingeringLimit = 4096
    private var lastFlushTime: Int64 = 0
    var ignoredEvents = 0
    private var firstError: (any Error)?
    private var closed = false

    /// Writes `capture.pcap` in `directory`, or, with `ringBytes`, a ring of `capture-000.pcap`,
    /// `capture-001.pcap`, … whose total size stays within `ringBytes` (oldest deleted first).
    /// - Parameters:
    ///   - directory: the run folder (created if missing).
    ///   - ringBytes: the ring bound in bytes (at least 1 MiB), or nil for one unbounded file.
    ///   - startedAt: the run's start as seconds since the Unix epoch; event times are added to it.
    /// - Throws: `ChaosError` `.badInput` for a ring under 1 MiB, `.io` when a file cannot be created.
    public init(directory: String, ringBytes: Int? = nil, startedAt: Double) throws {
        files = try CaptureFileSet(directory: directory, ringBytes: ringBytes)
        startedAtNanoseconds = Int64((startedAt * 1e9).rounded())
    }

    /// Writes one unbounded pcap file at `path`.
    /// - Parameter startedAt: the run's start as seconds since the Unix epoch.
    public init(path: String, startedAt: Double) throws {
        files = try CaptureFileSet(path: path)
        startedAtNanoseconds = Int64((startedAt * 1e9).rounded())
    }

    /// What the writer has done so far.
    public struct Statistics: Hashable, Sendable {
        /// Packets written.
        public var packets: Int
        /// Packets dropped because a frozen ring was full.
        public var droppedPackets: Int
        /// Bytes of the capture files that exist now.
        public var fileBytes: Int
        /// Events that could not be written (data for a connection never opened, or after its reset).
        public var ignoredEvents: Int
    }

    /// Counters for the report and tests.
    public var statistics: Statistics {
        lock.withLock {
            Statistics(packets: files.writtenPackets, droppedPackets: files.droppedPackets,
                       fileBytes: files.totalBytes, ignoredEvents: ignoredEvents)
        }
    }

    /// The capture files that exist now, oldest first.
    public var paths: [String] { lock.withLock { files.paths } }

    /// Records one event of the live proxy. Fault events are not traffic and are skipped.
    public func record(_ event: TrafficEvent) {
        lock.withLock {
            guard !closed else { return }
            do {
                try apply(event)
                if event.time - lastFlushTime >= 1_000_000_000 {
                    files.flush()
                    lastFlushTime = event.time
                }
            } catch {
                if firstError == nil { firstError = error }
            }
        }
    }

    /// Records events in order.
    public func record<Events: Sequence<TrafficEvent>>(contentsOf events: Events) {
        for event in events { record(event) }
    }

    /// Keeps the ring around the first anomaly: stops deleting old files, trims what came before
    /// to half the ring and lets what follows fill the other half, then drops later packets.
    /// Does nothing without a ring or when already frozen.
    public func freeze() {
        lock.withLock { files.freeze() }
    }

    /// Pushes buffered packets to disk.
    public func flush() {
        lock.withLock { files.flush() }
    }

    /// Flushes and closes the capture. Later events are ignored.
    /// - Throws: the first error met while writing (a ring file that could not be created).
    public func close() throws {
        try lock.withLock {
            guard !closed else { return }
            closed = true
            files.close()
            if let firstError { throw firstError }
        }
    }

    deinit { files.close() }
}

/// Both legs of one proxied connection.
struct SynthesizedConnection {
    var clientLeg: SynthesizedLeg
    var serverLeg: SynthesizedLeg

    /// Both legs reset or closed both ways (acknowledgements may still come).
    var isClosed: Bool { [clientLeg, serverLeg].allSatisfy { $0.reset || $0.isFinished } }

    subscript(side: Side) -> SynthesizedLeg {
        get { side == .client ? clientLeg : serverLeg }
        set { if side == .client { clientLeg = newValue } else { serverLeg = newValue } }
    }
}
