import ChaosCore
import NIOCore
import Testing

@testable import ChaosProxy

/// The nftables scripts of the kernel dead path, as text (the rules themselves are tried on the kernel by
/// `DeadPathTests`), and which flows a dead direction drops.
@Suite("Kernel dead path: nft scripts and flows")
struct KernelDeadPathScriptTests {
    let up = [
        KernelFlow(sourceIP: "127.0.0.1", sourcePort: 40_001, destinationIP: "127.0.0.1", destinationPort: 5000),
        KernelFlow(sourceIP: "127.0.0.1", sourcePort: 40_002, destinationIP: "127.0.0.1", destinationPort: 6000),
    ]

    @Test("the table hooks prerouting (the sender saw its segment leave) and has a set per family and drop")
    func createScript() {
        let script = NftScript.create(table: "chaos_42")
        #expect(script.hasPrefix("add table inet chaos_42\n"))
        #expect(script.contains("add chain inet chaos_42 prerouting { type filter hook prerouting priority -300; policy accept; }"))
        for set in ["dead4", "data4", "dead6", "data6"] { #expect(script.contains("add set inet chaos_42 \(set) {")) }
        #expect(script.contains("ip saddr . tcp sport . ip daddr . tcp dport @dead4 drop\n"))
        // One way only: pure acknowledgements pass (doff 8: 20 + 32 bytes of headers, the timestamps option).
        #expect(script.contains("@data4 ip hdrlength 5 tcp doff 8 ip length != 52 drop\n"))
        #expect(script.contains("@data6 tcp doff 8 ip6 length != 32 drop\n"))
        #expect(script.contains("@data4 tcp flags & (syn | fin | rst) != 0 drop\n"))
        #expect(!script.contains("output"))
    }

    @Test("a change leaves the old set before it joins the new one, per family, in one script")
    func changeScript() {
        let six = KernelFlow(sourceIP: "::1", sourcePort: 1, destinationIP: "::1", destinationPort: 2)
        let script = NftScript.change(
            table: "chaos_7",
            [(up[0], nil, .everything), (up[1], .data, .everything), (six, .everything, nil), (up[0].reversed, .data, .data)]
        )
        #expect(
            script == """
                delete element inet chaos_7 data4 { 127.0.0.1 . 40002 . 127.0.0.1 . 6000 }
                delete element inet chaos_7 dead6 { ::1 . 1 . ::1 . 2 }
                add element inet chaos_7 dead4 { 127.0.0.1 . 40001 . 127.0.0.1 . 5000, 127.0.0.1 . 40002 . 127.0.0.1 . 6000 }

                """
        )
        #expect(NftScript.change(table: "chaos_7", [(up[0], .data, .data)]).isEmpty)
    }

    @Test("the tables of chaos processes that are gone are stale; others' and live ones' are not")
    func staleTables() {
        let listing = "table inet chaos_100\ntable inet chaos_200\ntable ip nat\ntable inet filter\ntable inet chaos_x\n"
        #expect(NftScript.staleTables(in: listing) { $0 == 200 } == ["chaos_100"])
    }

    @Test(
        "both ways dead drops what the proxy sends the ends (their segments still reach it); one way drops that way's data only; alive drops nothing"
    )
    func dropsPerDirection() {
        let (client, server) = (up[0], up[1])
        let both = KernelDrop.drops(dead: [.upstream, .downstream], client: client, server: server)
        #expect(both.count == 4)
        #expect(Set(both.filter { $0.drop == .everything }.map(\.flow)) == [client.reversed, server])
        #expect(Set(both.filter { $0.drop == nil }.map(\.flow)) == [client, server.reversed])
        let upOnly = KernelDrop.drops(dead: [.upstream], client: client, server: server)
        #expect(Set(upOnly.filter { $0.drop == .data }.map(\.flow)) == [client, server])
        #expect(upOnly.filter { $0.drop != .data }.allSatisfy { $0.drop == nil })
        #expect(KernelDrop.drops(dead: [], client: client, server: server).allSatisfy { $0.drop == nil })
        #expect(KernelDrop.drops(dead: [.upstream, .downstream], client: nil, server: server).map(\.flow) == [server, server.reversed])
    }

    @Test("a flow's addresses: an IPv4-mapped IPv6 address is its IPv4 address; two families make no flow")
    func flowFromAddresses() throws {
        let mapped = try SocketAddress(ipAddress: "::ffff:127.0.0.1", port: 40_001)
        let four = try SocketAddress(ipAddress: "127.0.0.1", port: 5000)
        #expect(KernelFlow(from: mapped, to: four) == up[0])
        #expect(KernelFlow(from: try SocketAddress(ipAddress: "::1", port: 1), to: four) == nil)
        #expect(KernelFlow(from: nil, to: four) == nil)
        #expect(up[0].reversed.reversed == up[0] && up[0].setElement == "127.0.0.1 . 40001 . 127.0.0.1 . 5000")
    }
}
