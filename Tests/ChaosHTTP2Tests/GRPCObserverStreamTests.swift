@testable import ChaosHTTP2
import Testing

@Suite("gRPC messages on one call: cut over frames and reads, and cut short by RST_STREAM")
struct GRPCObserverStreamTests {
    private static let path = "/chat.v1.Chat/Talk"
    private static let message = Array("a message cut over three DATA frames".utf8)

    /// A request's HEADERS on `stream`.
    private static func call(_ encoder: inout Frames.Encoder, stream: UInt32 = 1) -> [UInt8] {
        Frames.frame(1, flags: 0x4, stream: stream, encoder.block(Frames.request(path: path, session: "s3")))
    }

    private static func isMessage(_ event: GRPCEvent) -> Bool {
        if case .message = event { true } else { false }
    }

    @Test("a message over three DATA frames and two TCP reads is one message, reported when its last frame is in, in each direction")
    func threeFramesTwoReads() {
        var client = Frames.Encoder(), server = Frames.Encoder()
        let wire = Frames.grpc(Self.message)
        // Cuts: inside the 5-byte prefix, then inside the message.
        let frames = Frames.data(stream: 1, Array(wire[..<3])) + Frames.data(stream: 1, Array(wire[3..<20]))
            + Frames.data(stream: 1, Array(wire[20...]), endStream: true)
        let request = Frames.preface + Frames.settings() + Self.call(&client) + frames
        let response = Frames.settings() + Frames.frame(1, flags: 0x4, stream: 1, server.block([(":status", "200")])) + frames
        var observer = GRPCObserver()
        for (bytes, fromClient) in [(request, true), (response, false)] {
            // The first read ends inside the second DATA frame's payload.
            let cut = bytes.count - frames.count + 12 + 9 + 5
            let feed = { (observer: inout GRPCObserver, piece: [UInt8]) in
                piece.withUnsafeBytes { fromClient ? observer.feedClient($0) : observer.feedServer($0) }
            }
            let first = feed(&observer, Array(bytes[..<cut]))
            #expect(!first.contains(where: Self.isMessage), "\(first)")
            let second = feed(&observer, Array(bytes[cut...]))
            #expect(second == [.message(stream: 1, bytes: Self.message, compressed: false, endOffset: Int64(bytes.count))],
                    fromClient ? "request" : "response")
        }
        #expect(observer.path(of: 1) == Self.path, "no trailers yet: the call is open")
    }

    @Test("RST_STREAM mid-message: the reset is reported, the partial message never is, and the next call's messages are whole")
    func resetMidMessage() {
        var encoder = Frames.Encoder()
        let wire = Frames.grpc(Self.message)
        let half = wire.count / 2
        var observer = GRPCObserver()
        let start = Frames.preface + Frames.settings() + Self.call(&encoder) + Frames.data(stream: 1, Array(wire[..<half]))
        let begun = start.withUnsafeBytes { observer.feedClient($0) }
        #expect(begun.count == 1)
        guard case .call(1, Self.path, _) = begun.first else { Issue.record("\(begun)"); return }
        // The client cancels (CANCEL = 8); the rest of the message, still in flight, arrives after the reset.
        let reset = Frames.frame(3, stream: 1, Frames.word(8))
        let late = Frames.data(stream: 1, Array(wire[half...]), endStream: true)
        let next = Self.call(&encoder, stream: 3) + Frames.data(stream: 3, Frames.grpc([7, 7, 7]), endStream: true)
        let events = (reset + late + next).withUnsafeBytes { observer.feedClient($0) }
        #expect(events.count == 3, "\(events)")
        #expect(events.first == .http2(.reset(stream: 1, code: 8)))
        #expect(events.filter(Self.isMessage) == [.message(stream: 3, bytes: [7, 7, 7], compressed: false,
                                                           endOffset: Int64(start.count + reset.count + late.count + next.count))])
        #expect(observer.path(of: 1) == nil, "the reset ended the call")
        #expect(HTTP2ErrorCode.name(8) == "CANCEL")
    }
}
