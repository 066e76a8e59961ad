import ChaosCapture
import ChaosCore
import Foundation
import Testing

/// A reset's acknowledgement number is not an acknowledgement: Linux resets a socket closed with unread data with
/// RST+ACK whose number covers that data, which the receiver may have dropped, or read (its ACK waiting for a reply to
/// ride on). A live relay's TCP never counts it (the RST is not processed as an ACK), so a capture must not either; what
/// went out to a receiver that resets with no FIN of its own first is cut from its acknowledgements instead
/// (`acknowledgementsCut`: unconfirmed), as the live relay says. A receiver that had sent FIN closed its socket, and
/// what reached it after met no reader: no cut.
@Suite("CaptureReader: acknowledgements and resets")
struct ResetAcknowledgementTests {
    private static func read(_ script: ScriptedTCP) throws -> [TrafficEvent] {
        let path = NSTemporaryDirectory() + "chaos-rst-ack-\(UUID().uuidString).pcap"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try script.write(to: path)
        return try CaptureReader.readAll(path: path).0
    }

    private static func cuts(_ events: [TrafficEvent]) -> [Int64] {
        events.compactMap { event -> Int64? in
            if case .path(.acknowledgementsCut(.server, let upTo)) = event.kind { upTo } else { nil }
        }
    }

    @Test("bytes the receiver only 'acknowledged' in its RST are not acknowledged (those its ACK covered are): they are cut")
    func resetDoesNotAcknowledge() throws {
        let script = ScriptedTCP()
        var flow = script.open(40001, to: 7001)
        script.send(Array("first\n".utf8), on: &flow, fromClient: true)
        script.sendThenServerResets(Array("second\n".utf8), on: &flow)
        let events = try Self.read(script)
        let acknowledged = events.compactMap { event -> Int64? in
            if case .acknowledged(_, let upTo) = event.kind { upTo } else { nil }
        }
        #expect(acknowledged.max() == 6, "acknowledged: \(acknowledged)")
        #expect(Self.cuts(events) == [13], "the second line went out ahead of the reset: \(events.map(\.kind))")
        let cutAt = events.firstIndex { if case .path(.acknowledgementsCut) = $0.kind { true } else { false } }
        let resetAt = events.firstIndex { if case .closed(_, .reset) = $0.kind { true } else { false } }
        #expect(cutAt != nil && resetAt != nil && cutAt! < resetAt!, "the cut, then the reset")
    }

    @Test("a receiver that sent FIN before its reset read nothing after it: no cut")
    func resetAfterOwnFIN() throws {
        let script = ScriptedTCP()
        var flow = script.open(40002, to: 7001)
        script.send(Array("first\n".utf8), on: &flow, fromClient: true)
        script.serverFIN(&flow)
        script.sendThenServerResets(Array("second\n".utf8), on: &flow)
        let events = try Self.read(script)
        #expect(Self.cuts(events).isEmpty, "\(events.map(\.kind))")
        #expect(events.contains { if case .closed(_, .reset) = $0.kind { true } else { false } }, "the reset is still seen")
    }

    @Test(
        "bytes sent again and never acknowledged (a dead path dropped them) did not go ahead of a reset, the receiver's or the sender's: neither cut nor acknowledged"
    )
    func retransmittedBytesAreNotAheadOfAReset() throws {
        for serverResets in [true, false] {
            let script = ScriptedTCP()
            var flow = script.open(serverResets ? 40003 : 40004, to: 7001)
            script.send(Array("first\n".utf8), on: &flow, fromClient: true)
            script.sendUnacknowledged(Array("second\n".utf8), on: &flow, times: 2)
            script.reset(&flow, fromClient: !serverResets)
            let events = try Self.read(script)
            let acknowledged = events.compactMap { event -> Int64? in
                if case .acknowledged(_, let upTo) = event.kind { upTo } else { nil }
            }
            #expect(acknowledged.max() == 6, "acknowledged: \(acknowledged)")
            #expect(Self.cuts(events).isEmpty, "\(events.map(\.kind))")
            #expect(events.contains { if case .closed(_, .reset) = $0.kind { true } else { false } }, "the reset is still seen")
        }
        // Sent once, the same bytes went ahead of the sender's reset.
        let script = ScriptedTCP()
        var flow = script.open(40005, to: 7001)
        script.send(Array("first\n".utf8), on: &flow, fromClient: true)
        script.sendUnacknowledged(Array("second\n".utf8), on: &flow, times: 1)
        script.reset(&flow, fromClient: true)
        let acknowledged = try Self.read(script).compactMap { event -> Int64? in
            if case .acknowledged(_, let upTo) = event.kind { upTo } else { nil }
        }
        #expect(acknowledged.max() == 13, "acknowledged: \(acknowledged)")
    }
}
