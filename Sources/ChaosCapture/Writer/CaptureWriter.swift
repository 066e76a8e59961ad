package import ChaosCore
import Foundation

/// Writes the proxied traffic of a run as a pcap file that Wireshark and tshark read as real TCP
/// conversations: it consumes the live `TrafficEvent` stream and synthesizes both legs of every
/// connection (client ↔ listen and proxyLocal ↔ server) with handshakes, sequence and
/// acknowledgement numbers, FIN and RST, and correct IP and TCP checksums.
///
/// Mapping: `.read(.client, b)` is client→listen data, `.written(.server, b)` proxyLocal→server,
/// `.read(.server, b)` server→proxyLocal, `.written(.client, b)` listen→client. `.closed(side, .fin)`
/// is a FIN from that side's peer, propagated as a FIN from the proxy on the other leg (the relay
/// half-closes); `.reset` and `.error` are an RST from the peer; `.resetByFault` an RST from the proxy; `.cutByFault` the
/// proxy's FIN and its peer's answer.
///
/// The file has link type RAW (IPv4/IPv6, no link header) and nanosecond timestamps (`startedAt` + the
/// event's time). It is classic pcap, or, when some proxies terminate TLS, pcapng marked as decrypted: its
/// section comment says which proxies' connections hold decrypted application bytes, and the first packet
/// of each of their connections says so too (Wireshark shows both; classic pcap has no comments).
/// Packets are buffered and flushed about once a second of event time and on ``flush()`` / ``close()``.
///
/// Thread-safe: every method takes one lock, so several producers may share a writer; one serial
/// consumer is the cheapest use.
package final class CaptureWriter: @unchecked Sendable {
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
    /// The latest event's time: a FIN that still waits for held bytes goes at it when the capture closes.
    private var lastEventTime: Int64 = 0
    var ignoredEvents = 0
    private var firstError: (any Error)?
    private var closed = false
    /// The proxies whose connections' payloads are decrypted TLS (they terminate it).
    let decryptedProxies: Set<String>

    /// The section comment of a capture whose `decrypted` proxies terminate TLS; nil (classic pcap) when none does.
    static func sectionComment(decrypted: Set<String>) -> String? {
        guard !decrypted.isEmpty else { return nil }
        return "chaos: both legs of every proxied connection, synthesized from the bytes the proxy relayed. DECRYPTED: "
            + "connections of the TLS proxies \(decrypted.sorted().joined(separator: ", ")) hold the application bytes "
            + "chaos decrypted (no TLS records); keys.log in the run folder decrypts a wire capture of the run."
    }

    /// The comment on the first packet of a connection of a proxy that terminates TLS.
    static func decryptedComment(proxy: String) -> String {
        "decrypted by chaos: proxy \(proxy) terminates TLS; this connection's payloads are its application bytes"
    }

    /// Writes `capture.pcap` in `directory`, or, with `ringBytes`, a ring of `capture-000.pcap`,
    /// `capture-001.pcap`, … whose total size stays within `ringBytes` (oldest deleted first).
    /// - Parameters:
    ///   - directory: the run folder (created if missing).
    ///   - ringBytes: the ring bound in bytes (at least 1 MiB), or nil for one unbounded file.
    ///   - startedAt: the run's start as seconds since the Unix epoch; event times are added to it.
    /// - Throws: `ChaosError` `.badInput` for a ring under 1 MiB, `.io` when a file cannot be created.
    ///   - decryptedProxies: the proxies that terminate TLS: the file says their connections are decrypted.
    package init(directory: String, ringBytes: Int? = nil, startedAt: Double, decryptedProxies: Set<String> = []) throws {
        files = try CaptureFileSet(directory: directory, ringBytes: ringBytes, comment: Self.sectionComment(decrypted: decryptedProxies))
        startedAtNanoseconds = Int64((startedAt * 1e9).rounded())
        self.decryptedProxies = decryptedProxies
    }

    /// Writes one unbounded pcap file at `path`.
    /// - Parameters:
    ///   - startedAt: the run's start as seconds since the Unix epoch.
    ///   - decryptedProxies: the proxies that terminate TLS: the file says their connections are decrypted.
    package init(path: String, startedAt: Double, decryptedProxies: Set<String> = []) throws {
        files = try CaptureFileSet(path: path, comment: Self.sectionComment(decrypted: decryptedProxies))
        startedAtNanoseconds = Int64((startedAt * 1e9).rounded())
        self.decryptedProxies = decryptedProxies
    }

    /// What the writer has done so far.
    package struct Statistics: Hashable, Sendable {
        /// Packets written.
        package var packets: Int
        /// Packets dropped because a frozen ring was full.
        package var droppedPackets: Int
        /// Bytes of the capture files that exist now.
        package var fileBytes: Int
        /// Events that could not be written (data for a connection never opened, or after its reset).
        package var ignoredEvents: Int
    }

    /// Counters for the report and tests.
    package var statistics: Statistics {
        lock.withLock {
            Statistics(
                packets: files.writtenPackets,
                droppedPackets: files.droppedPackets,
                fileBytes: files.totalBytes,
                ignoredEvents: ignoredEvents
            )
        }
    }

    /// The capture files that exist now, oldest first.
    package var paths: [String] { lock.withLock { files.paths } }

    /// Records one event of the live proxy. Fault events are not traffic and are skipped.
    package func record(_ event: TrafficEvent) {
        lock.withLock {
            guard !closed else { return }
            do {
                lastEventTime = max(lastEventTime, event.time)
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
    package func record<Events: Sequence<TrafficEvent>>(contentsOf events: Events) {
        for event in events { record(event) }
    }

    /// Keeps the ring around the first anomaly: stops deleting old files, trims what came before
    /// to half the ring and lets what follows fill the other half, then drops later packets.
    /// Does nothing without a ring or when already frozen.
    package func freeze() {
        lock.withLock { files.freeze() }
    }

    /// Pushes buffered packets to disk.
    package func flush() {
        lock.withLock { files.flush() }
    }

    /// Flushes and closes the capture. Later events are ignored.
    /// - Throws: the first error met while writing (a ring file that could not be created).
    package func close() throws {
        try lock.withLock {
            guard !closed else { return }
            closed = true
            do { try sendWaitingFins(time: lastEventTime) } catch { if firstError == nil { firstError = error } }
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
