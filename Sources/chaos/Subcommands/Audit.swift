import ArgumentParser
import ChaosAudit
import ChaosCapture
import ChaosCore
import ChaosProtocols
import ChaosReport
import ChaosRunner
import ChaosTLSDecryption
import Foundation

/// `chaos audit CAPTURE…`: audit a capture taken anywhere with the same engine, into the same report.
struct Audit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Audit a pcap/pcapng capture (taken anywhere) with the same engine; writes the same report.",
        discussion: """
            The protocol comes from a scenario (--protocol-from) or from flags. A capture taken on loopback \
            through a chaos proxy shows both legs: they are paired (automatically, or by --proxy-port) so that \
            bytes read from a producer count as sent and bytes written to the consumer as delivered. \
            Exit 0 when every expectation holds, 1 when one fails, 2 on a bad or unreadable capture.
            """
    )

    @Argument(help: "The capture file(s); several are read as one capture (a ring's files, oldest first).")
    var captures: [String]

    @OptionGroup var protocolOptions: ProtocolOptions

    @Option(help: "A BPF filter expression (as tcpdump takes).")
    var filter: String?

    @Option(help: "The server's port, when the capture missed the SYNs.")
    var serverPort: UInt16?

    @Option(help: "The chaos proxy's listen port: pair the client and server legs through it.")
    var proxyPort: UInt16?

    @Flag(help: "Do not pair proxy legs: each TCP flow, and each UDP flow that begins a QUIC connection, is its own connection.")
    var noPairing = false

    @Option(
        help: ArgumentHelp(
            "An NSS key log (SSLKEYLOGFILE, a run's keys.log, a QUIC stack's) to decrypt TLS and QUIC with (repeatable).",
            valueName: "file"
        )
    )
    var keylog: [String] = []

    @Option(help: "The report folder (default: Reports/<name>-<UTC time>/).")
    var out: String?

    func run() async throws {
        let scenario = try protocolOptions.scenario()
        let spec = try protocolOptions.spec(from: scenario)
        if ProtocolRegistry.plugin(named: spec.framing.name)?.readsDatagrams == true {
            throw ChaosError.badInput("framing \(spec.framing.name) reads a udp:// proxy's datagrams; chaos audit reads TCP captures")
        }
        let engine = try AuditEngine(spec: spec)
        var options = CaptureReadOptions(filter: filter, serverPort: serverPort)
        if noPairing { options.pairing = .off } else if let proxyPort { options.pairing = .proxyPort(proxyPort) }
        let keylogs = keylog + (scenario?.protocolSpec?.keylog ?? [])
        if !keylogs.isEmpty {
            var keys = KeyLog()
            for path in keylogs { try keys.read(path: path) }
            options.keyLog = keys
        }
        let statistics = try CaptureReader.readPipelined(paths: captures, options: options) { engine.ingest($0) }
        let audit = engine.finish()
        let name = scenario?.name ?? "capture"
        let folder = try RunFolder(scenario: name + "-audit", out: out)
        var extra = [
            "capture.files": captures.joined(separator: ", "), "capture.packets": "\(statistics.packets)",
            "capture.connections": "\(statistics.connections)",
            "capture.loss_bytes": "\(statistics.captureLossBytes)",
            "capture.loss_holes": "\(statistics.captureLossHoles)",
            "capture.retransmitted_bytes": "\(statistics.retransmittedBytes)",
        ]
        if statistics.skippedPackets > 0 { extra["capture.skipped_packets"] = "\(statistics.skippedPackets)" }
        if options.keyLog != nil {
            extra["capture.keylog"] = keylogs.joined(separator: ", ")
            extra["capture.tls_conversations"] = "\(statistics.tlsConversations)"
            extra["capture.tls_decrypted"] = "\(statistics.tlsDecrypted)"
            extra["capture.tls_records"] = "\(statistics.tlsRecords)"
            extra["capture.tls_plaintext_bytes"] = "\(statistics.tlsPlaintextBytes)"
            extra["capture.tls_failed"] = "\(statistics.tlsFailed)"
            extra["capture.tls_abandoned"] = "\(statistics.tlsAbandoned)"
            if statistics.quicConnections > 0 {
                extra["capture.quic_connections"] = "\(statistics.quicConnections)"
                extra["capture.quic_packets_opened"] = "\(statistics.quicPacketsOpened)"
                extra["capture.quic_packets_unopened"] = "\(statistics.quicPacketsUnopened)"
                extra.merge(statistics.quicPaths.facts) { $1 }
            }
        }
        // What could not be decrypted was not audited: no verdict can vouch for it.
        var unaudited: [String] = []
        if statistics.tlsFailed > 0 {
            unaudited.append(
                "\(statistics.tlsFailed) of \(statistics.tlsConversations) TLS conversation(s) could not be decrypted "
                    + "(in whole or in part; see the protocol anomalies): their bytes were not audited"
            )
        }
        if statistics.quicPacketsUnopened > 0 {
            unaudited.append(
                "\(statistics.quicPacketsUnopened) QUIC packet(s) could not be opened (first: "
                    + (statistics.quicProblems.first ?? "?") + "): their frames were not audited"
            )
        }
        let undecrypted = unaudited.isEmpty ? nil : unaudited.joined(separator: "; ")
        var inputs =
            ReportInputs(
                scenario: name,
                seed: scenario?.seed ?? 0,
                startedAt: Date(),
                elapsed: .seconds(audit.elapsedS),
                complete: true,
                timeline: Timeline(seed: scenario?.seed ?? 0, duration: .seconds(audit.elapsedS), occurrences: []),
                audit: audit,
                expectations: scenario?.expectations ?? [],
                replay: "chaos audit " + CommandLine.arguments.dropFirst(2).joined(separator: " "),
                errorReason: undecrypted,
                extra: extra
            )
        // A capture whose connections carried no audited message judged nothing.
        inputs.scope = JudgedScope(auditsMessages: true)
        let report = RunReport(inputs)
        try report.write(toDirectory: folder.url.path)
        let totals = audit.totals
        Console.line(
            "read \(statistics.packets) packets, \(statistics.connections) connection(s) "
                + "(\(statistics.pairedConnections) paired through a proxy), capture loss \(statistics.captureLossBytes) bytes "
                + "in \(statistics.captureLossHoles) hole(s)"
        )
        if options.keyLog != nil {
            Console.line(
                "TLS: \(statistics.tlsDecrypted) of \(statistics.tlsConversations) conversation(s) decrypted, "
                    + "\(statistics.tlsRecords) records, \(statistics.tlsPlaintextBytes) plaintext bytes"
                    + (statistics.tlsFailed > 0 ? "; \(statistics.tlsFailed) could not be decrypted" : "")
                    + (statistics.tlsAbandoned > 0
                        ? "; \(statistics.tlsAbandoned) abandoned in the handshake (no keys needed: "
                            + "the client sent nothing after its ClientHello)" : "")
            )
            if statistics.quicConnections > 0 {
                Console.line(
                    "QUIC: \(statistics.quicConnections) connection(s), \(statistics.quicPacketsOpened) packets opened"
                        + (statistics.quicPacketsUnopened > 0
                            ? "; \(statistics.quicPacketsUnopened) could not be (" + statistics.quicProblems.joined(separator: "; ") + ")"
                            : "")
                )
            }
        }
        Console.line(
            "messages: \(totals.sent) sent, \(totals.delivered) delivered, \(totals.ok) ok, \(totals.lost) lost, "
                + "\(totals.duplicated) duplicated, \(totals.redelivered) redelivered, \(totals.reordered) reordered, \(totals.gaps) gaps"
        )
        Console.line("verdict: \(report.verdict.rawValue.uppercased())" + (report.verdictReason.map { " (\($0))" } ?? ""))
        Console.line("report: \(folder.url.appendingPathComponent("report.md").path)")
        switch report.verdict.rawValue {
        case "pass": return
        case "fail", "inconclusive": throw ExitCode(1)
        default: throw ExitCode(2)
        }
    }
}
