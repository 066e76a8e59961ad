import Foundation
import Testing

/// The tests that count through tshark rely on ``TsharkDecodeAs``: a committed TLS capture with its client's port moved
/// to 48898 (Beckhoff AMS's) hides its handshake from tshark, and the arguments bring it back.
@Suite("tshark's port-chosen dissectors pinned for the tests that count through it")
struct TsharkDecodeAsTests {
    @Test("a TLS conversation from client port 48898: tshark alone reads AMS and no ServerHello; with the arguments it finds the handshake")
    func amsPort() throws {
        let fixture = ChaosCLI.packageRoot.appendingPathComponent("Tests/Fixtures/captures/tls/tls13-aes128gcm.pcap")
        let capture = FileManager.default.temporaryDirectory.appendingPathComponent("ams-port-\(UUID().uuidString).pcap").path
        defer { try? FileManager.default.removeItem(atPath: capture) }
        try Data(Self.movingPort(52586, to: 48898, in: [UInt8](Data(contentsOf: fixture)))).write(to: URL(fileURLWithPath: capture))
        let serverHellos = { (extra: [String]) throws -> Int in
            let shark = try ChaosCLI.runBlocking(
                ["tshark", "-r", capture] + extra + [
                    "-Y", "tls.handshake.type == 2", "-T", "fields",
                    "-e", "tcp.srcport",
                ],
                timeout: 60,
                program: "/usr/bin/env"
            )
            #expect(shark.status == 0, "\(shark.stderr)")
            return shark.stdout.split(separator: "\n").count
        }
        #expect(try serverHellos([]) == 0, "tshark chose TLS for port 48898 by itself: this test no longer shows the collision")
        let arguments = try TsharkDecodeAs.arguments(capture, as: "tls")
        #expect(arguments.contains("tcp.port==48898,tls") && arguments.contains("tcp.port==21919,tls"), "\(arguments)")
        #expect(try serverHellos(arguments) == 1)
    }

    /// The classic pcap `bytes` with every IPv4 TCP port `from` changed to `to` (tshark does not check TCP checksums).
    static func movingPort(_ from: UInt16, to: UInt16, in bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        var offset = 24
        while offset + 16 <= bytes.count {
            let length = Int(bytes[offset + 8]) | Int(bytes[offset + 9]) << 8 | Int(bytes[offset + 10]) << 16 | Int(bytes[offset + 11]) << 24
            let frame = offset + 16
            if frame + 34 <= bytes.count, bytes[frame + 12] == 0x08, bytes[frame + 13] == 0x00, bytes[frame + 23] == 6 {
                let tcp = frame + 14 + Int(bytes[frame + 14] & 0x0f) * 4
                for port in [tcp, tcp + 2] where tcp + 4 <= bytes.count && UInt16(bytes[port]) << 8 | UInt16(bytes[port + 1]) == from {
                    bytes[port] = UInt8(to >> 8)
                    bytes[port + 1] = UInt8(to & 0xff)
                }
            }
            offset = frame + length
        }
        return bytes
    }
}
