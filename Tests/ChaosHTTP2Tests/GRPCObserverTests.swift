@testable import ChaosHTTP2
import Testing

@Suite("gRPC calls observed over HTTP/2: paths, metadata, messages across frames and reads, trailers")
struct GRPCObserverTests {
    @Test("messages split across DATA frames and TCP reads, several per frame, each with its frame's end offset")
    func messagesAcrossFrames() {
        var encoder = Frames.Encoder()
        let m1 = [UInt8](repeating: 1, count: 10), m2 = [UInt8](repeating: 2, count: 3), m3 = [UInt8](repeating: 3, count: 40_000)
        let stream = Frames.grpc(m1) + Frames.grpc(m2) + Frames.grpc(m3) + Frames.grpc([])
        let head = Frames.preface + Frames.settings() + Frames.frame(1, flags: 4, stream: 1,
                                                                      encoder.block(Frames.request(path: "/p.S/M", session: "s7")))
        // Frame boundaries: inside m1's prefix, then m2 and m3's start, then the rest (over three frames, each
        // within the initial SETTINGS_MAX_FRAME_SIZE).
        let cuts = [3, 30, 16_000, 32_000, stream.count]
        var frames: [UInt8] = [], ends: [Int64] = [], from = 0
        for cut in cuts {
            frames += Frames.data(stream: 1, Array(stream[from..<cut]), endStream: cut == stream.count)
            ends.append(Int64(head.count + frames.count))
            from = cut
        }
        let bytes = head + frames
        for chunk in [1, 1000, bytes.count] {
            var observer = GRPCObserver()
            var events: [GRPCEvent] = []
            for start in stride(from: 0, to: bytes.count, by: chunk) {
                events += Array(bytes[start..<min(bytes.count, start + chunk)]).withUnsafeBytes { observer.feedClient($0) }
            }
            #expect(events == [
                .call(stream: 1, path: "/p.S/M", metadata: [HTTP2HeaderField("content-type", "application/grpc"),
                                                           HTTP2HeaderField("te", "trailers"), HTTP2HeaderField("x-session", "s7")]),
                .message(stream: 1, bytes: m1, compressed: false, endOffset: ends[1]),
                .message(stream: 1, bytes: m2, compressed: false, endOffset: ends[1]),
                .message(stream: 1, bytes: m3, compressed: false, endOffset: ends[4]),
                .message(stream: 1, bytes: [], compressed: false, endOffset: ends[4]),
            ], "chunk \(chunk)")
        }
    }

    @Test("responses, the compressed flag, trailers with grpc-status, GOAWAY and PING pass up; a message over the cap is counted, not held")
    func serverSide() {
        var client = Frames.Encoder(), server = Frames.Encoder()
        var observer = GRPCObserver(maxMessage: 100)
        let request = Frames.preface + Frames.settings()
            + Frames.frame(1, flags: 4, stream: 1, client.block(Frames.request(path: "/p.S/M", session: "a")))
        _ = request.withUnsafeBytes { observer.feedClient($0) }
        let big = [UInt8](repeating: 7, count: 5000)
        let headers: [UInt8] = Frames.frame(1, flags: 4, stream: 1,
                                            server.block([(":status", "200"), ("content-type", "application/grpc")]))
        let messages: [UInt8] = Frames.grpc([9, 9], compressed: true) + Frames.grpc(big)
        let trailers: [UInt8] = Frames.frame(1, flags: 5, stream: 1,
                                             server.block([("grpc-status", "4"), ("grpc-message", "deadline exceeded")]))
        var response: [UInt8] = Frames.settings() + headers
        response += Frames.data(stream: 1, messages)
        response += Frames.frame(6, flags: 1, Frames.word(0) + Frames.word(3))
        response += trailers
        response += Frames.frame(7, Frames.word(1) + Frames.word(0))
        let events = response.withUnsafeBytes { observer.feedServer($0) }
        let dataEnd = Int64(Frames.settings().count + headers.count + 9 + messages.count)
        #expect(events.count == 5, "\(events)")
        guard events.count == 5 else { return }
        #expect(events[0] == .message(stream: 1, bytes: [9, 9], compressed: true, endOffset: dataEnd))
        #expect(events[1] == .oversized(stream: 1, length: 5000, endOffset: dataEnd))
        #expect(events[2] == .http2(.ping(ack: true, opaque: 3)))
        #expect(events[3] == .status(stream: 1, code: 4, message: "deadline exceeded"))
        #expect(events[4] == .http2(.goaway(lastStream: 1, code: 0, debug: "")))
        #expect(observer.path(of: 1) == nil, "the call ended with its trailers")
    }
}
