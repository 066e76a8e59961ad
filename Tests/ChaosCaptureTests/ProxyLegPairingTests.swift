import ChaosCapture
import ChaosCore
import Foundation
import Testing

/// Pairing a proxy's two legs in a capture taken outside chaos (tcpdump of both legs), when two
/// clients connect at once and the proxy's dials to the server overtake each other.
@Suite("Pairing proxy legs by their payload")
struct ProxyLegPairingTests {
    static let pairings: [CaptureReadOptions.Pairing] = [.automatic, .proxyPort(7000)]

    /// What the capture holds: each connection's traffic and endpoints, keyed by the client's port.
    struct Read {
        var statistics: CaptureStatistics
        var events: [TrafficEvent]
        var endpoints: [String: ConnectionEndpoints] = [:]
        var traffic: [String: ConnectionTraffic] = [:]
    }

    static func read(_ script: ScriptedTCP, pairing: CaptureReadOptions.Pairing) throws -> Read {
        let path = NSTemporaryDirectory() + "chaos-pairing-\(UUID().uuidString).pcap"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try script.write(to: path)
        let (events, statistics) = try CaptureReader.readAll(path: path, options: CaptureReadOptions(pairing: pairing))
        var read = Read(statistics: statistics, events: events)
        let traffic = ConnectionTraffic.collect(events)
        for event in events {
            guard case .opened(let endpoints) = event.kind else { continue }
            let port = String(endpoints.client.split(separator: ":").last ?? "")
            read.endpoints[port] = endpoints
            read.traffic[port] = traffic[event.connection]
        }
        return read
    }

    @Test(
        "server legs dialled in the opposite order are paired with the client legs whose bytes they carry",
        arguments: pairings
    )
    func crosswiseDials(pairing: CaptureReadOptions.Pairing) throws {
        let common = TestSupport.bytes(count: 80, seed: 7)
        let request1 = common + Array("request from client one\n".utf8)
        let request2 = common + Array("request from client two, a longer one\n".utf8)
        let reply1 = Array("reply to one\n".utf8)
        let reply2 = Array("reply to two\n".utf8)
        let script = ScriptedTCP()
        var c1 = script.open(40001, to: 7000)
        var c2 = script.open(40002, to: 7000)
        var s2 = script.open(50002, to: 7001)  // the proxy's dial for client 2 overtook client 1's
        var s1 = script.open(50001, to: 7001)
        // Equal for 80 bytes; each leg cut into different segments.
        script.send(request1[..<50], on: &c1, fromClient: true)
        script.send(request2[..<90], on: &c2, fromClient: true)
        script.send(request2[..<70], on: &s2, fromClient: true)
        script.send(request1[..<30], on: &s1, fromClient: true)
        script.send(request1[50...], on: &c1, fromClient: true)
        script.send(request2[90...], on: &c2, fromClient: true)
        script.send(request2[70...], on: &s2, fromClient: true)
        script.send(request1[30...], on: &s1, fromClient: true)
        script.send(reply2[..<5], on: &s2, fromClient: false)
        script.send(reply2[5...], on: &s2, fromClient: false)
        script.send(reply1, on: &s1, fromClient: false)
        script.send(reply1, on: &c1, fromClient: false)
        script.send(reply2, on: &c2, fromClient: false)
        script.close(&c1)
        script.close(&c2)
        script.close(&s1)
        script.close(&s2)

        let read = try Self.read(script, pairing: pairing)
        #expect(read.statistics.connections == 2)
        #expect(read.statistics.pairedConnections == 2)
        for (port, proxyLocal, request, reply) in [("40001", "50001", request1, reply1), ("40002", "50002", request2, reply2)] {
            let endpoints = try #require(read.endpoints[port])
            #expect(endpoints.proxyLocal.hasSuffix(":" + proxyLocal), "client \(port) is paired with \(endpoints.proxyLocal)")
            let traffic = try #require(read.traffic[port])
            #expect(TestSupport.same(traffic.readFromClient, request))
            #expect(TestSupport.same(traffic.writtenToServer, request))
            #expect(TestSupport.same(traffic.readFromServer, reply))
            #expect(TestSupport.same(traffic.writtenToClient, reply))
            #expect(traffic.closes == ["client:fin", "server:fin"])
        }
        // The legs' held events replay interleaved as seen: times never run backwards in a connection.
        for id in Set(read.events.map(\.connection)) {
            let times = read.events.filter { $0.connection == id }.map(\.time)
            #expect(times == times.sorted())
        }
    }

    @Test(
        "server legs that carry nothing for longer than the window (a partition holds the requests) and were dialled in the opposite order wait for their payload",
        arguments: pairings
    )
    func heldRequestsAfterCrosswiseDials(pairing: CaptureReadOptions.Pairing) throws {
        try Self.heldCrosswise(pairing: pairing, greeting: nil, seed: 9, requests: ("GET / stream one\n", "GET / stream two\n"))
    }

    @Test(
        "the same when the server speaks first on each server leg (HTTP/2's SETTINGS, which the partition holds from the clients too): its greeting tells nothing, the requests do (the gRPC pair's tcpdump, s68: two reconnects paired crosswise, streams mixed)",
        arguments: pairings
    )
    func serverSpeaksFirstAfterCrosswiseDials(pairing: CaptureReadOptions.Pairing) throws {
        try Self.heldCrosswise(pairing: pairing, greeting: Array("SETTINGS\n".utf8), seed: 11, requests: ("PING one\n", "PING two\n"))
    }

    /// Two clients' requests, equal for 40 bytes, held by a partition past the 1 s window, the proxy's dials crossed;
    /// with `greeting`, the server speaks first on each server leg and the partition holds that from the clients too.
    /// Each client leg must be paired with the server leg that carries its request.
    static func heldCrosswise(pairing: CaptureReadOptions.Pairing, greeting: [UInt8]?, seed: UInt64, requests: (String, String)) throws {
        let common = TestSupport.bytes(count: 40, seed: seed)
        let request1 = common + Array(requests.0.utf8)
        let request2 = common + Array(requests.1.utf8)
        let script = ScriptedTCP()
        var c1 = script.open(40001, to: 7000)
        var c2 = script.open(40002, to: 7000)
        var s2 = script.open(50002, to: 7001)  // the dials overtook each other
        var s1 = script.open(50001, to: 7001)
        if let greeting {
            script.send(greeting, on: &s2, fromClient: false)
            script.send(greeting, on: &s1, fromClient: false)
        }
        script.send(request1, on: &c1, fromClient: true)
        script.send(request2, on: &c2, fromClient: true)
        script.wait(milliseconds: 1_400)  // the partition: the proxy holds what it read past the 1 s window
        script.send(request1, on: &s1, fromClient: true)
        script.send(request2, on: &s2, fromClient: true)
        if let greeting {
            script.send(greeting, on: &c1, fromClient: false)
            script.send(greeting, on: &c2, fromClient: false)
        }
        for flow in [c1, c2, s1, s2] {
            var flow = flow
            script.close(&flow)
        }

        let read = try Self.read(script, pairing: pairing)
        #expect(read.statistics.pairedConnections == 2)
        #expect(read.endpoints["40001"]?.proxyLocal.hasSuffix(":50001") == true, "\(read.endpoints)")
        #expect(read.endpoints["40002"]?.proxyLocal.hasSuffix(":50002") == true)
        #expect(read.traffic["40001"]?.writtenToServer == request1)
        #expect(read.traffic["40002"]?.writtenToServer == request2)
    }

    @Test("legs whose payload cannot tell them apart fall back to the oldest client leg", arguments: pairings)
    func indistinguishableLegs(pairing: CaptureReadOptions.Pairing) throws {
        let request = Array("the same request\n".utf8)
        let script = ScriptedTCP()
        let c1 = script.open(40001, to: 7000)
        let c2 = script.open(40002, to: 7000)
        let s2 = script.open(50002, to: 7001)
        let s1 = script.open(50001, to: 7001)
        for flow in [c1, c2, s2, s1] {
            var flow = flow
            script.send(request, on: &flow, fromClient: true)
            script.close(&flow)
        }

        let read = try Self.read(script, pairing: pairing)
        #expect(read.statistics.connections == 2)
        #expect(read.statistics.pairedConnections == 2)
        #expect(read.endpoints["40001"]?.proxyLocal.hasSuffix(":50002") == true, "SYN order, as without payload")
        #expect(read.endpoints["40002"]?.proxyLocal.hasSuffix(":50001") == true)
        #expect(read.traffic["40001"]?.writtenToServer == request)
    }

    @Test("identical requests: the replies (server to client) tell the legs apart", arguments: pairings)
    func repliesTell(pairing: CaptureReadOptions.Pairing) throws {
        let request = Array("the same request\n".utf8)
        let script = ScriptedTCP()
        var c1 = script.open(40001, to: 7000)
        var c2 = script.open(40002, to: 7000)
        var s2 = script.open(50002, to: 7001)
        var s1 = script.open(50001, to: 7001)
        script.send(request, on: &c1, fromClient: true)
        script.send(request, on: &c2, fromClient: true)
        script.send(request, on: &s2, fromClient: true)
        script.send(request, on: &s1, fromClient: true)
        script.send(Array("reply two".utf8), on: &s2, fromClient: false)
        script.send(Array("reply one".utf8), on: &s1, fromClient: false)
        script.send(Array("reply one".utf8), on: &c1, fromClient: false)
        script.send(Array("reply two".utf8), on: &c2, fromClient: false)
        script.close(&c1)
        script.close(&c2)
        script.close(&s2)
        script.close(&s1)

        let read = try Self.read(script, pairing: pairing)
        #expect(read.statistics.pairedConnections == 2)
        #expect(read.endpoints["40001"]?.proxyLocal.hasSuffix(":50001") == true)
        #expect(read.endpoints["40002"]?.proxyLocal.hasSuffix(":50002") == true)
        #expect(read.traffic["40002"]?.readFromServer == Array("reply two".utf8))
    }

    @Test("a server leg with one candidate client leg is paired at its SYN, whatever it carries", arguments: pairings)
    func singleCandidate(pairing: CaptureReadOptions.Pairing) throws {
        let script = ScriptedTCP()
        var client = script.open(40001, to: 7000)
        var server = script.open(50001, to: 7001)  // its SYN is packet 3: 3 ms
        script.send(Array("hello".utf8), on: &client, fromClient: true)
        script.send(Array("HELLO!".utf8), on: &server, fromClient: true)
        script.close(&client)
        script.close(&server)

        let read = try Self.read(script, pairing: pairing)
        #expect(read.statistics.connections == 1)
        #expect(read.statistics.pairedConnections == 1)
        #expect(read.endpoints["40001"]?.proxyLocal.hasSuffix(":50001") == true)
        #expect(read.traffic["40001"]?.readFromClient == Array("hello".utf8))
        #expect(read.traffic["40001"]?.writtenToServer == Array("HELLO!".utf8))
        #expect(read.events.first { if case .opened = $0.kind { true } else { false } }?.time == 3_000_000)
    }

    @Test(
        "after a handoff that gave the proxy a new loopback address, its server legs from there are paired with their client legs (Linux's loopback is all of 127/8): a run's own capture audits without --proxy-port"
    )
    func serverLegFromANewLoopbackAddress() throws {
        let script = ScriptedTCP()
        var before = script.open(40001, to: 7000)
        var beforeUpstream = script.open(50001, to: 7001)
        script.send(Array("one".utf8), on: &before, fromClient: true)
        script.send(Array("one".utf8), on: &beforeUpstream, fromClient: true)
        script.reset(&before, fromClient: true)
        script.reset(&beforeUpstream, fromClient: true)
        // The handoff: the proxy's new upstream connections come from 127.0.0.2.
        var after = script.open(40002, to: 7000)
        var afterUpstream = script.open(50002, to: 7001, from: [127, 0, 0, 2])
        script.send(Array("two".utf8), on: &after, fromClient: true)
        script.send(Array("two".utf8), on: &afterUpstream, fromClient: true)
        script.close(&after)
        script.close(&afterUpstream)

        let read = try Self.read(script, pairing: .automatic)
        #expect(read.statistics.connections == 2)
        #expect(read.statistics.pairedConnections == 2)
        #expect(read.endpoints["40002"]?.proxyLocal == "127.0.0.2:50002", "\(read.endpoints)")
        #expect(read.traffic["40002"]?.writtenToServer == Array("two".utf8))
    }

    @Test("a flow from another host is no proxy's dial: automatic pairing leaves it a connection of its own")
    func otherHostIsNoServerLeg() throws {
        let script = ScriptedTCP()
        var client = script.open(40001, to: 7000)
        var stranger = script.open(50001, to: 7001, from: [10, 0, 0, 2])
        script.send(Array("hello".utf8), on: &client, fromClient: true)
        script.send(Array("hello".utf8), on: &stranger, fromClient: true)
        script.close(&client)
        script.close(&stranger)

        let read = try Self.read(script, pairing: .automatic)
        #expect(read.statistics.connections == 2)
        #expect(read.statistics.pairedConnections == 0)
    }
}
