/// The `text/event-stream` format (WHATWG HTML 9.2.6) over the content bytes of a response: lines ended by CRLF,
/// LF or CR; `field: value` lines (one space after the colon dropped), comments (`:`) ignored; a blank line
/// dispatches the event when it had a `data` field. An event's data lines are joined with `\n`; with
/// `wholeEvent`, the event is all its field lines as written (`id: 7`, `event: tick`, `data: …`), joined with `\n`.
///
/// Memory is bounded: a line is kept up to `cap` + 16 bytes and an event's data up to `cap` bytes; an event with
/// more data is read on without being kept and reported as oversized.
struct SSEEventParser {
    /// What a blank line or a field line produced.
    enum Output {
        /// A complete event: its data (valid only during the call) and the input position just past the line end
        /// of its blank line.
        case event(UnsafeBufferPointer<UInt8>, end: Int)
        /// An event whose data was over the cap: its size and end, as for `event`.
        case oversized(bytes: Int, end: Int)
        /// A `retry:` field with a reconnection time in milliseconds, at the end of its line.
        case retry(milliseconds: Int, end: Int)
    }

    /// The largest data kept.
    let cap: Int
    /// Whether an event is handed over as all its field lines rather than its data.
    let wholeEvent: Bool
    /// The current line, up to ``lineLimit`` bytes.
    private var line: [UInt8] = []
    /// The current line's length, kept or not.
    private var lineLength = 0
    /// The last byte was a CR: a LF right after it ends no second line.
    private var afterCR = false
    /// The current event's data.
    private var data: [UInt8] = []
    /// Whether the current event had a `data` field.
    private var hasData = false
    /// Whether a line of the current event was kept (the next one is joined with `\n`).
    private var keptLine = false
    /// The current event's data size, kept or not.
    private var dataSize = 0
    /// The current event's `event:` type (empty: `message`).
    private(set) var eventType: [UInt8] = []
    /// The last `id:` field read (the id a client would resume from).
    private(set) var lastEventID: String?
    /// Whether an event is handed over as a JSON envelope of its own fields and its data.
    let envelope: Bool
    /// The current event's own `id:` field (nil: it has none).
    private var eventID: [UInt8]?
    /// The envelope being built (kept between events).
    private var envelopeBytes: [UInt8] = []

    init(cap: Int, wholeEvent: Bool = false, envelope: Bool = false) {
        self.cap = cap
        self.wholeEvent = wholeEvent
        self.envelope = envelope && !wholeEvent
    }

    private var lineLimit: Int { cap + 16 }

    /// Whether part of an event was read.
    var hasPartialEvent: Bool { lineLength > 0 || hasData }

    /// The bytes the parser holds in its buffers (what a test checks stays bounded).
    var bufferedCapacity: Int { line.capacity + data.capacity + eventType.capacity + envelopeBytes.capacity }

    /// Forgets the partial event.
    mutating func dropPartial() {
        line = []
        lineLength = 0
        data = []
        hasData = false
        keptLine = false
        dataSize = 0
        eventType = []
        eventID = nil
    }

    /// Reads `range` of `input`; `output` is called for every event and `retry` field, in order.
    mutating func feed(_ input: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ output: (Output) -> Void) {
        for index in range {
            let byte = input[index]
            if afterCR {
                afterCR = false
                if byte == 10 { continue }
            }
            if byte == 10 || byte == 13 {
                afterCR = byte == 13
                endLine(end: index + 1, output)
            } else {
                if line.count < lineLimit { line.append(byte) }
                lineLength += 1
            }
        }
    }

    private mutating func endLine(end: Int, _ output: (Output) -> Void) {
        defer {
            line.removeAll(keepingCapacity: line.capacity <= 4096)
            lineLength = 0
        }
        guard lineLength > 0 else { return dispatch(end: end, output) }
        guard line[0] != UInt8(ascii: ":") else { return }
        let colon = line.firstIndex(of: UInt8(ascii: ":")) ?? line.count
        var valueStart = min(colon + 1, line.count)
        if valueStart < line.count, line[valueStart] == UInt8(ascii: " ") { valueStart += 1 }
        let complete = lineLength == line.count
        let isData = line[..<colon].elementsEqual("data".utf8)
        if wholeEvent || isData {
            let from = wholeEvent ? 0 : valueStart
            dataSize += (keptLine ? 1 : 0) + lineLength - from
            if dataSize > cap {
                data = []
            } else {
                if keptLine { data.append(10) }
                data.append(contentsOf: line[from...])
            }
            keptLine = true
        }
        switch isData ? "data" : String(decoding: line[..<colon], as: UTF8.self) {
        case "data":
            hasData = true
        case "event" where complete:
            eventType = Array(line[valueStart...])
        case "id" where complete && !line.contains(0):
            lastEventID = String(decoding: line[valueStart...], as: UTF8.self)
            if envelope { eventID = Array(line[valueStart...]) }
        case "retry" where complete && valueStart < line.count && line[valueStart...].allSatisfy({ (48...57).contains($0) }):
            output(.retry(milliseconds: Int(String(decoding: line[valueStart...], as: UTF8.self)) ?? Int.max, end: end))
        default:
            break  // an unknown field, or one too long to be a real id, type or retry: ignored
        }
    }

    private mutating func dispatch(end: Int, _ output: (Output) -> Void) {
        defer {
            data.removeAll(keepingCapacity: data.capacity <= 4096)
            hasData = false
            keptLine = false
            dataSize = 0
            eventType = []
            eventID = nil
        }
        guard hasData else { return }
        if dataSize > cap { return output(.oversized(bytes: dataSize, end: end)) }
        guard envelope else { return data.withUnsafeBufferPointer { output(.event($0, end: end)) } }
        buildEnvelope()
        envelopeBytes.withUnsafeBufferPointer { output(.event($0, end: end)) }
        if envelopeBytes.capacity > 4096 + cap { envelopeBytes = [] }
    }

    /// `{"id":7,"event":"tick","data":{…}}`: the id a number when it is all digits (a string otherwise, absent
    /// without one), the type `message` when the event names none, the data as written when it is a JSON object or
    /// array and as a string otherwise.
    private mutating func buildEnvelope() {
        envelopeBytes.removeAll(keepingCapacity: true)
        envelopeBytes.append(contentsOf: #"{"#.utf8)
        if let eventID {
            envelopeBytes.append(contentsOf: #""id":"#.utf8)
            if !eventID.isEmpty, eventID.count <= 18, eventID.allSatisfy({ (48...57).contains($0) }) {
                envelopeBytes.append(contentsOf: eventID)
            } else {
                Self.appendQuoted(eventID, to: &envelopeBytes)
            }
            envelopeBytes.append(UInt8(ascii: ","))
        }
        envelopeBytes.append(contentsOf: #""event":"#.utf8)
        Self.appendQuoted(eventType.isEmpty ? Array("message".utf8) : eventType, to: &envelopeBytes)
        envelopeBytes.append(contentsOf: #","data":"#.utf8)
        let first = data.first { $0 != 32 && $0 != 9 && $0 != 10 }
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
            envelopeBytes.append(contentsOf: data)
        } else {
            Self.appendQuoted(data, to: &envelopeBytes)
        }
        envelopeBytes.append(UInt8(ascii: "}"))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Appends `bytes` as a JSON string literal: quotes, backslashes and control characters escaped.
    static func appendQuoted(_ bytes: some Collection<UInt8>, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                out.append(UInt8(ascii: "\\"))
                out.append(byte)
            case 10: out.append(contentsOf: #"\n"#.utf8)
            case 0..<32: out.append(contentsOf: [92, 117, 48, 48, hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 15)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
