import Foundation

/// tshark picks a TCP conversation's dissector by its ports, and an ephemeral client port can be another protocol's
/// registered one (48898 is Beckhoff's AMS): tshark then reads that conversation as AMS, never sees its TLS, and calls
/// its packets malformed. A test that counts handshakes or messages through tshark finds one short, and one that asks
/// for no malformed packet fails. These arguments pin every port of a capture to the dissector the test means.
enum TsharkDecodeAs {
    /// `-d tcp.port==P,DISSECTOR` for every port that opened a connection in `capture` (the SYNs' source and
    /// destination): `tls` for a TLS pair, `data` for bytes tshark should not interpret.
    static func arguments(_ capture: String, as dissector: String) throws -> [String] {
        let syns = try ChaosCLI.runBlocking(
            [
                "tshark", "-r", capture, "-Y", "tcp.flags.syn == 1 && tcp.flags.ack == 0",
                "-T", "fields", "-e", "tcp.srcport", "-e", "tcp.dstport",
            ],
            timeout: 60,
            program: "/usr/bin/env"
        )
        let ports = Set(syns.stdout.split(whereSeparator: { $0 == "\n" || $0 == "\t" }).compactMap { Int($0) })
        return ports.sorted().flatMap { ["-d", "tcp.port==\($0),\(dissector)"] }
    }
}
