import ChaosCapture
import ChaosCore
import Foundation
import Testing

/// A reset's acknowledgement number is not an acknowledgement: Linux resets a socket closed with unread data with
/// RST+ACK whose number covers that data, which the receiver dropped. A live relay's TCP never counts it (the RST is
/// not processed as an ACK), so a capture must not either, or its audit would call a dropped message delivered.
@Suite("CaptureReader: acknowledgements and resets")
struct ResetAcknowledgementTests {
    @Test("bytes the receiver only 'acknowledged' in its RST are not acknowledged; those its ACK covered are")
    func resetDoesNotAcknowledge() throws {
        let script = ScriptedTCP()
        var flow = script.open(40001, to: 7001)
        script.send(Array("first\n".utf8), on: &flow, fromClient: true)
        script.sendThenServerResets(Array("second\n".utf8), on: &flow)
        let path = NSTemporaryDirectory() + "chaos-rst-ack-\(UUID().uuidString).pcap"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try script.write(to: path)
        let (events, _) = try CaptureReader.readAll(path: path)
        let acknowledged = events.compactMap { event -> Int64? in
            if case .acknowledged(_, let upTo) = event.kind { upTo } else { nil }
        }
        #expect(acknowledged.max() == 6, "acknowledged: \(acknowledged)")
        #expect(events.contains { if case .closed(_, .reset) = $0.kind { true } else { false } }, "the reset is still seen")
    }
}
