package import ChaosCore

/// `framing: http3`: HTTP/3 (RFC 9114) on the streams of QUIC connections (`transport: quic`, a `udp://` proxy and
/// the pair's key log). Each request stream is a connection of the audit's: its messages are the newline-delimited
/// messages of the request's and the response's bodies (the payloads of their DATA frames, however the frames and
/// packets cut them), read with `format:` as on TCP. HEADERS are read with QPACK's static table (RFC 9204 Appendix A)
/// and literals, Huffman-coded or not, so that the stream key may come from the request (`stream: query:NAME`,
/// `header:NAME`, `:path` included); a field line naming QPACK's dynamic table is counted (`qpack_dynamic_fields`),
/// not read. Unidirectional streams (control, QPACK, push) carry no messages. Requests are counted (`h3_requests`),
/// responses by status (`h3_statuses`).
package enum HTTP3Protocol: ProtocolPlugin {
    package static let names = ["http3", "h3"]

    package static let counters = [
        ProtocolCounter("h3Requests", "HTTP/3 requests"),
        ProtocolCounter("qpackDynamicFields", "header fields named by QPACK's dynamic table (not read)"),
    ]
    package static let counterFamilies = [ProtocolCounter("h3Statuses", "HTTP/3 response statuses")]

    package static let carriesBinary = false
    /// `header:NAME` and `query:NAME` of the stream's request.
    package static let streamKeyPrefixes = ["header:", "query:"]
    package static let readsQUICStreams = true

    package static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer { HTTP3Framer() }

    /// A request stream's bytes, the client's leg first: the fuzzer's bytes follow a request and a response head.
    package static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? {
        FuzzSetup(
            spec: ProtocolSpec(framing: .http3, stream: "query:stream", maxMessage: 4096),
            prelude: [
                .read(.client, fuzzRequest), .written(.server, fuzzRequest), .read(.server, fuzzResponse),
                .written(.client, fuzzResponse),
            ],
            input: input
        )
    }

    /// HEADERS: POST (static 20), :path with a literal value, then a literal name and Huffman-coded value ("www").
    static let fuzzRequest: [UInt8] = {
        let path = Array("/lines?stream=s1".utf8)
        let section: [UInt8] = [0x00, 0x00, 0xC0 | 20, 0x51, UInt8(path.count)] + path + [0x23, 0x61, 0x62, 0x63, 0x83, 0xF1, 0xE3, 0xC7]
        return [0x01, UInt8(section.count)] + section
    }()
    /// HEADERS: :status 200 (static 25).
    static let fuzzResponse: [UInt8] = [0x01, 0x03, 0x00, 0x00, 0xC0 | 25]
}

/// A new ``HTTP3Session`` per stream.
struct HTTP3Framer: ProtocolFramer {
    func makeSession() -> any ProtocolSession { HTTP3Session() }
}

/// What the legs of one QUIC stream share: what kind of stream it is, the request that opened it, and the decoder
/// of its HEADERS' Huffman-coded strings.
final class HTTP3Session: HTTPRequestSession {
    enum Kind { case request, unidirectional }

    /// Set by the client's leg at the stream's first integer (nil: it has not read one; a stream whose server leg
    /// reads first is one the server opened).
    var kind: Kind?
    let request = WebSocketSession()
    /// Made at the first Huffman-coded string of any of the stream's HEADERS.
    var huffman = QPACKHuffman()

    func makeDecoder(_ direction: Direction, cap: Int) -> any LegDecoder {
        HTTP3Decoder(upstream: direction == .upstream, session: self, cap: cap)
    }
}

extension ProtocolSpec.Framing {
    /// `framing: http3`.
    package static let http3 = Self(name: HTTP3Protocol.name)
}
