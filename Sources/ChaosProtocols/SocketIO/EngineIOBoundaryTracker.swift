/// The frame boundaries of one direction of an Engine.IO connection: HTTP/1.1 messages one after the other (the
/// long-polling requests and their answers on a kept-alive connection, bodies by `Content-Length` or chunked), and,
/// once a head asks for or grants the upgrade, WebSocket frames. A head longer than ``headLimit``, or an answer whose
/// body runs to the connection's end, leaves no boundary to find: nothing is put in on that connection.
struct EngineIOBoundaryTracker: SteppingTracker {
    enum Phase: Equatable {
        /// A message's head: its bytes so far are in `head` (none: a boundary).
        case head
        /// A body of known length: bytes still to come.
        case body(remaining: UInt64)
        /// A chunk's size line, up to its LF.
        case chunkSize
        /// A chunk's data and the CRLF after it: bytes still to come.
        case chunkData(remaining: UInt64)
        /// The trailer after the last chunk, up to an empty line; `lineLength`: bytes of the current line (CR excluded).
        case trailer(lineLength: Int)
        /// After the upgrade: WebSocket frames.
        case frames
        /// No boundary can be found again on this connection.
        case lost
    }

    /// The longest head followed (polling heads are a few hundred bytes).
    static let headLimit = 16 * 1024

    private(set) var phase = Phase.head
    private var head: [UInt8] = []
    private var line: [UInt8] = []
    private var matcher = HTTPHeadMatcher()
    private var frames = WebSocketBoundaryTracker(afterHead: true)

    /// Whether the client asked to upgrade a session it already has (a WebSocket request whose query names its `sid`):
    /// the upgrade from long polling, whose probe follows. (A session that begins on a WebSocket names none.)
    private(set) var upgradesASession = false

    /// The session (`sid`) the client's latest request named, if it named one (its bytes only: the server's name none);
    /// nil after a request that names none (a new session's handshake).
    private(set) var session: String?

    /// The heads this direction has written: requests (the client's), answers begun (the server's).
    private(set) var heads = 0

    /// Whether the connection still carries HTTP long-polling (not yet upgraded to a WebSocket, nor lost).
    var isPolling: Bool {
        switch phase {
        case .frames, .lost: false
        default: true
        }
    }

    var atBoundary: Bool {
        switch phase {
        case .head: head.isEmpty
        case .frames: frames.atBoundary
        default: false
        }
    }

    mutating func step(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
        var index = start
        switch phase {
        case .head:
            let byte = bytes[index]
            index += 1
            head.append(byte)
            if matcher.ends(with: byte) {
                phase = Self.next(afterHead: head)
                heads += 1
                session = Self.sessionNamed(by: head)
                if session != nil, phase == .frames { upgradesASession = true }
                head.removeAll(keepingCapacity: true)
                matcher = HTTPHeadMatcher()
            } else if head.count > Self.headLimit {
                phase = .lost
                head = []
            }
        case .body(let remaining):
            let (next, left) = PayloadSkip.skip(bytes, from: index, remaining: remaining)
            index = next
            phase = left > 0 ? .body(remaining: left) : .head
        case .chunkData(let remaining):
            let (next, left) = PayloadSkip.skip(bytes, from: index, remaining: remaining)
            index = next
            phase = left > 0 ? .chunkData(remaining: left) : .chunkSize
        case .chunkSize:
            let byte = bytes[index]
            index += 1
            guard byte == 10 else {
                line.append(byte)
                if line.count > 1024 { phase = .lost }
                return index
            }
            let size = Self.chunkSize(line)
            line.removeAll(keepingCapacity: true)
            switch size {
            case nil: phase = .lost
            case 0?: phase = .trailer(lineLength: 0)
            case let size?: phase = .chunkData(remaining: size + 2)  // the data, then its CRLF
            }
        case .trailer(let length):
            let byte = bytes[index]
            index += 1
            if byte == 10 {
                phase = length == 0 ? .head : .trailer(lineLength: 0)
            } else if byte != 13 {
                phase = length < 8192 ? .trailer(lineLength: length + 1) : .lost
            }
        case .frames:
            return frames.step(bytes, from: index)
        case .lost:
            return bytes.count
        }
        return index
    }

    /// What follows a complete head: its body, the next head, or WebSocket frames after an upgrade.
    static func next(afterHead head: [UInt8]) -> Phase {
        let text = String(decoding: head, as: UTF8.self)
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: true)
        guard let first = lines.first else { return .lost }
        var length: UInt64?
        var chunked = false
        var upgrade = false
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingSpaces.lowercased()
            let value = line[line.index(after: colon)...].trimmingSpaces.lowercased()
            switch name {
            case "content-length": length = UInt64(value)
            case "transfer-encoding": chunked = value.hasSuffix("chunked")
            case "upgrade": upgrade = value == "websocket"
            default: break
            }
        }
        if first.hasPrefix("HTTP/") {
            let status = first.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } ?? 0
            if status == 101 { return .frames }
            // 1xx, 204 and 304 have no body; any other answer without a length runs to the connection's end.
            if status / 100 == 1 || status == 204 || status == 304 { return .head }
            if chunked { return .chunkSize }
            guard let length else { return .lost }
            return length == 0 ? .head : .body(remaining: length)
        }
        // A request: a WebSocket upgrade's next bytes are frames (a client sends none before the answer).
        if upgrade { return .frames }
        if chunked { return .chunkSize }
        let body = length ?? 0
        return body == 0 ? .head : .body(remaining: body)
    }

    /// The session `head` names, when it is a request whose target's query has a `sid=`.
    static func sessionNamed(by head: [UInt8]) -> String? {
        let first = String(decoding: head.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self)
        guard !first.hasPrefix("HTTP/"), let query = first.split(separator: " ").dropFirst().first?.split(separator: "?").dropFirst().first else {
            return nil
        }
        guard let field = query.split(separator: "&").first(where: { $0.hasPrefix("sid=") && $0.count > 4 }) else { return nil }
        return String(field.dropFirst(4))
    }

    /// A chunk-size line's size (hex, extensions after `;` ignored); nil when it does not parse.
    static func chunkSize(_ line: [UInt8]) -> UInt64? {
        var text = Substring(String(decoding: line, as: UTF8.self))
        if text.hasSuffix("\r") { text = text.dropLast() }
        if let semicolon = text.firstIndex(of: ";") { text = text[..<semicolon] }
        let trimmed = text.trimmingSpaces
        guard !trimmed.isEmpty, trimmed.count <= 15 else { return nil }
        return UInt64(trimmed, radix: 16)
    }
}
