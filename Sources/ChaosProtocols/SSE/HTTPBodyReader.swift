/// The body of one HTTP/1.1 message, as its head framed it: `Content-Length` bytes, chunked transfer-encoding
/// (RFC 9112 7.1: hex size lines with optional extensions, data, CRLF, a last chunk of 0 and trailer lines), or
/// everything up to the end of the connection. A state machine fed the leg's bytes in order, whatever the reads:
/// each step hands back the next run of content bytes, or the end of the body, or a problem. It buffers nothing.
struct HTTPBodyReader: Equatable {
    enum State: Equatable {
        /// `remaining` bytes of a `Content-Length` body.
        case length(remaining: UInt64)
        /// A chunk-size line: the size so far, its digit count, and whether an extension (or space) began.
        case chunkSize(size: UInt64, digits: Int, extensionBegan: Bool)
        /// `remaining` bytes of a chunk's data.
        case chunkData(remaining: UInt64)
        /// The line end after a chunk's data.
        case chunkDataEnd
        /// The trailer section after the last chunk: bytes of the current line so far.
        case trailer(lineLength: Int)
        /// Everything up to the end of the connection.
        case untilClose
        /// The body ended.
        case done
    }

    /// What one step found.
    enum Output: Equatable {
        /// Content bytes: a range of the input.
        case content(Range<Int>)
        /// The body ended just before this input position.
        case ended(at: Int)
        /// The body is not framed as its head said (at this input position).
        case problem(String, at: Int)
    }

    /// The longest trailer line read (a longer one is not HTTP).
    static let lineLimit = 4096

    private(set) var state: State

    /// A body framed as `state` says (`.done`: no body).
    init(_ state: State) { self.state = state }

    /// A chunked body.
    static var chunked: HTTPBodyReader { HTTPBodyReader(.chunkSize(size: 0, digits: 0, extensionBegan: false)) }

    /// Reads from `start` up to the next output; returns where it stopped and the output, if any (nil: the input
    /// ran out first).
    mutating func step(_ input: UnsafeBufferPointer<UInt8>, from start: Int) -> (index: Int, output: Output?) {
        var index = start
        while index < input.count {
            switch state {
            case .length(let remaining), .chunkData(let remaining):
                let take = Int(min(remaining, UInt64(input.count - index)))
                let left = remaining - UInt64(take)
                if case .length = state {
                    state = left == 0 ? .done : .length(remaining: left)
                } else {
                    state = left == 0 ? .chunkDataEnd : .chunkData(remaining: left)
                }
                return (index + take, take > 0 ? .content(index..<(index + take)) : nil)
            case .untilClose:
                return (input.count, .content(index..<input.count))
            case .done:
                return (index, .ended(at: index))
            case .chunkSize(let size, let digits, let extensionBegan):
                let byte = input[index]
                index += 1
                if byte == 10 {
                    guard digits > 0 else { return (index, .problem("a chunk-size line with no hex size", at: index - 1)) }
                    state = size == 0 ? .trailer(lineLength: 0) : .chunkData(remaining: size)
                } else if byte == 13 || extensionBegan {
                    state = .chunkSize(size: size, digits: digits, extensionBegan: true)
                } else if let value = Self.hexValue(byte), digits < 15 {
                    state = .chunkSize(size: size << 4 | UInt64(value), digits: digits + 1, extensionBegan: false)
                } else if digits > 0, byte == UInt8(ascii: ";") || byte == UInt8(ascii: " ") || byte == 9 {
                    state = .chunkSize(size: size, digits: digits, extensionBegan: true)
                } else {
                    return (index, .problem("not a chunk size: byte \(byte) in a chunk-size line", at: index - 1))
                }
            case .chunkDataEnd:
                let byte = input[index]
                index += 1
                if byte == 13 { continue }
                guard byte == 10 else { return (index, .problem("no line end after a chunk's data", at: index - 1)) }
                state = .chunkSize(size: 0, digits: 0, extensionBegan: false)
            case .trailer(let lineLength):
                let byte = input[index]
                index += 1
                if byte == 10 {
                    state = lineLength == 0 ? .done : .trailer(lineLength: 0)
                    if lineLength == 0 { return (index, .ended(at: index)) }
                } else if byte != 13 {
                    guard lineLength < Self.lineLimit else { return (index, .problem("a trailer line over \(Self.lineLimit) bytes", at: index - 1)) }
                    state = .trailer(lineLength: lineLength + 1)
                }
            }
        }
        return (index, nil)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 48...57: byte - 48
        case 65...70: byte - 55
        case 97...102: byte - 87
        default: nil
        }
    }
}

extension HTTPBodyReader {
    /// The body `head` frames: chunked, `Content-Length`, or (a response with neither) everything up to the close; a
    /// request with neither has none. nil: a `Content-Length` that is not a number.
    static func framing(of head: HTTPHead, request: Bool) -> HTTPBodyReader? {
        if head.header("transfer-encoding")?.lowercased().contains("chunked") == true { return .chunked }
        guard let text = head.header("content-length") else { return HTTPBodyReader(request ? .done : .untilClose) }
        guard let length = UInt64(text) else { return nil }
        return HTTPBodyReader(length == 0 ? .done : .length(remaining: length))
    }
}
