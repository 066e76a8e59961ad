package import ChaosCore

/// `framing: sse`: Server-Sent Events (the WHATWG `text/event-stream` format) in HTTP/1.1 responses, chunked or
/// not. One message is one event, and its body is the event's `data` (lines joined with `\n`): `format: json`
/// reads the data's keys (`seq: seq`, `/meta/seq`). A path that names the event's own fields (`seq: id`, the field
/// SSE resumes by; `event`) or its data (`data.seq`) makes the body the event itself, as JSON
/// (`{"id":7,"event":"tick","data":{…}}`, the id a number when it is one, the data as written when it is JSON and
/// as a string otherwise), and every path is read there: `id`, `event`, `data.KEY`, and a bare `KEY` or
/// `/pointer` in the data as before. With `format: text` the body is the whole event as written
/// (its field lines joined with `\n`), so the regex may read the event's id (`(?m)^id: ?(?<seq>\d+)`). The stream key
/// may come from the request that opened the stream (`stream: query:NAME` / `header:NAME`). A message ends on the
/// wire at the line end of the blank line that ends its event (its CR for a CRLF: where a client dispatches it).
/// A request's `Last-Event-ID` (a reconnect resuming from an event) is counted in `sseResumes`, each `retry:`
/// field in `sseRetries`; a response that is not an event stream carries no messages (`sseRefused`).
package enum SSEProtocol: ProtocolPlugin {
    package static let names = ["sse"]

    package static let counters = [
        ProtocolCounter("sseStreams", "event streams opened"),
        ProtocolCounter("sseRefused", "responses that are not event streams"),
        ProtocolCounter("sseResumes", "resumes (Last-Event-ID)"),
        ProtocolCounter("sseRetries", "retry fields"),
    ]

    package static let carriesBinary = false
    /// `header:NAME` and `query:NAME` of the request that opened the stream.
    package static let streamKeyPrefixes = ["header:", "query:"]

    package static func framer(_ spec: ProtocolSpec, auditedMethods: Set<String>?) throws -> any ProtocolFramer {
        SSEFramer(wholeEvent: spec.format == .text, envelope: namesEventFields(spec))
    }

    /// The event's own fields a path may name.
    static let eventFields: Set<String> = ["id", "event"]

    /// Whether a path of `spec` names the event's own fields or its data (`id`, `event`, `data`, `data.KEY`): the
    /// events are then handed over as JSON envelopes.
    static func namesEventFields(_ spec: ProtocolSpec) -> Bool {
        guard spec.format == .json else { return false }
        return spec.fieldPaths.contains { eventFields.contains($0) || $0 == "data" || $0.hasPrefix("data.") }
    }

    /// The envelope's path for a path as the scenario writes it: the event's fields at the top, everything else in
    /// its data; a request's `header:` / `query:` unchanged.
    static func envelopePath(_ path: String) -> String {
        if eventFields.contains(path) { return "/" + path }
        if streamKeyPrefixes.contains(where: { path.hasPrefix($0) }) { return path }
        return ProtocolSpec.envelopeDataPath(path)
    }

    package static func fieldSpec(_ spec: ProtocolSpec) -> ProtocolSpec {
        namesEventFields(spec) ? spec.rewritingPaths(envelopePath) : spec
    }

    /// Events after a request with a stream header and an event-stream response.
    package static func fuzzSetup(_ input: [UInt8]) -> FuzzSetup? {
        let request = Array("GET /events?s=1 HTTP/1.1\r\nX-Stream: c1\r\nLast-Event-ID: 3\r\n\r\n".utf8)
        let response = Array("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        return FuzzSetup(
            spec: ProtocolSpec(framing: .sse, stream: "header:x-stream", maxMessage: 4096),
            prelude: [
                .read(.client, request), .written(.server, request), .read(.server, response),
                .written(.client, response),
            ],
            input: input
        )
    }
}

/// A new ``SSESession`` per connection; `wholeEvent`: events are handed over as all their field lines; `envelope`: as
/// JSON envelopes of their fields and data.
struct SSEFramer: ProtocolFramer {
    let wholeEvent: Bool
    var envelope = false

    func makeSession() -> any ProtocolSession { SSESession(wholeEvent: wholeEvent, envelope: envelope) }
}

/// What the legs of one SSE connection share: the request that opened the stream (the first request read) and
/// whether the server answered it with an event stream.
final class SSESession: HTTPRequestSession {
    let request = WebSocketSession()
    /// nil until the first response head; true when it was a `200` with `Content-Type: text/event-stream`.
    private(set) var eventStream: Bool?
    /// Whether events are handed over as all their field lines (`format: text`) rather than their data.
    let wholeEvent: Bool
    /// Whether events are handed over as JSON envelopes (`{"id":…,"event":…,"data":…}`).
    let envelope: Bool

    /// A session; `wholeEvent` and `envelope` as ``SSEEventParser`` takes them.
    init(wholeEvent: Bool = false, envelope: Bool = false) {
        self.wholeEvent = wholeEvent
        self.envelope = envelope
    }

    /// Records the first response's verdict.
    func answered(eventStream: Bool) {
        if self.eventStream == nil { self.eventStream = eventStream }
    }

    func makeDecoder(_ direction: Direction, cap: Int) -> any LegDecoder {
        SSEDecoder(upstream: direction == .upstream, session: self, cap: cap)
    }
}

extension ProtocolSpec.Framing {
    /// `framing: sse`.
    package static let sse = Self(name: SSEProtocol.name)
}
