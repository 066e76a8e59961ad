import Glibc

/// Cuts one direction of one connection's byte stream into frames (messages), whatever the read sizes.
///
/// Complete frames are handed over in place (no copy); only a frame split across reads is buffered.
/// When the bytes do not fit the declared framing (a line longer than ``maximumFrame``, a length prefix
/// that is negative or too large) the splitter reports it once and then ignores the rest of the stream,
/// so a misconfigured protocol never floods the report.
package struct FrameSplitter {
    /// Why the stream does not fit the declared framing.
    package enum Problem: Equatable {
        /// No newline within `maximumFrame` bytes.
        case lineTooLong(Int)
        /// A length prefix that cannot be a frame length.
        case badLength(Int)
    }

    /// How frames are delimited.
    package enum Mode: Equatable, Sendable {
        case lines
        case lengthPrefixed(bytes: Int, offset: Int)
    }

    /// Called with the body of each complete frame and the position in the input just past its last
    /// byte (delimiter included): where the frame ends in the byte stream.
    typealias Frame = (_ body: UnsafeBufferPointer<UInt8>, _ end: Int) -> Void

    let mode: Mode
    let maximumFrame: Int
    /// The start of a frame that has not fully arrived.
    private(set) var partial: [UInt8] = []
    /// Set once the stream was found not to fit: everything after is skipped.
    private(set) var desynchronised = false

    init(mode: Mode, maximumFrame: Int = 16 << 20) {
        self.mode = mode
        self.maximumFrame = maximumFrame
    }

    /// Whether part of a frame is waiting for the rest (a close now truncates it).
    var hasPartialFrame: Bool { !desynchronised && !partial.isEmpty }

    /// Between two frames, with nothing buffered and the stream still in step with its framing.
    var isAtBoundary: Bool { !desynchronised && partial.isEmpty }

    /// Forgets a partial frame (after it was counted as truncated).
    mutating func dropPartial() { partial.removeAll(keepingCapacity: false) }

    /// Feeds `input`; calls `frame` with the body of every complete frame. Returns a problem the first time
    /// the stream is found not to fit the framing.
    @inline(__always)
    mutating func split(_ input: UnsafeBufferPointer<UInt8>, _ frame: Frame) -> Problem? {
        if desynchronised { return nil }
        switch mode {
        case .lines: return splitLines(input, frame)
        case .lengthPrefixed(let bytes, let offset): return splitPrefixed(input, width: bytes, offset: offset, frame)
        }
    }

    private mutating func splitLines(_ input: UnsafeBufferPointer<UInt8>, _ frame: Frame) -> Problem? {
        var position = 0
        let count = input.count
        if !partial.isEmpty {
            guard let newline = Self.newline(in: input, from: 0) else {
                partial.append(contentsOf: input)
                return checkLineLength()
            }
            partial.append(contentsOf: UnsafeBufferPointer(rebasing: input[0..<newline]))
            partial.withUnsafeBufferPointer { Self.emitLine($0, 0, $0.count, endingAt: newline + 1, frame) }
            partial.removeAll(keepingCapacity: true)
            position = newline + 1
        }
        while position < count {
            guard let newline = Self.newline(in: input, from: position) else {
                partial.append(contentsOf: UnsafeBufferPointer(rebasing: input[position..<count]))
                return checkLineLength()
            }
            Self.emitLine(input, position, newline, endingAt: newline + 1, frame)
            position = newline + 1
        }
        return nil
    }

    private mutating func checkLineLength() -> Problem? {
        guard partial.count > maximumFrame else { return nil }
        let length = partial.count
        desynchronised = true
        partial = []
        return .lineTooLong(length)
    }

    @inline(__always)
    private static func emitLine(
        _ buffer: UnsafeBufferPointer<UInt8>,
        _ start: Int,
        _ end: Int,
        endingAt inputEnd: Int,
        _ frame: Frame
    ) {
        var end = end
        if end > start, buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        guard end > start else { return }
        frame(UnsafeBufferPointer(rebasing: buffer[start..<end]), inputEnd)
    }

    @inline(__always)
    static func newline(in buffer: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        // memchr: the C library's vectorised scan, several times faster than a byte loop over ~100-byte lines.
        guard start < buffer.count, let base = buffer.baseAddress,
            let found = memchr(base + start, 10, buffer.count - start)
        else { return nil }
        return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
    }

    private mutating func splitPrefixed(
        _ input: UnsafeBufferPointer<UInt8>,
        width: Int,
        offset: Int,
        _ frame: Frame
    ) -> Problem? {
        var position = 0
        let count = input.count
        // Finish a buffered frame first, taking only the bytes it still needs.
        while !partial.isEmpty, position < count {
            let needed: Int
            if partial.count < width {
                needed = width - partial.count
            } else {
                let length = partial.withUnsafeBufferPointer { Self.length(in: $0, at: 0, width: width) } + offset
                if let problem = check(length) { return problem }
                needed = width + length - partial.count
            }
            let take = min(needed, count - position)
            partial.append(contentsOf: UnsafeBufferPointer(rebasing: input[position..<(position + take)]))
            position += take
            if partial.count >= width {
                let length = partial.withUnsafeBufferPointer { Self.length(in: $0, at: 0, width: width) } + offset
                if let problem = check(length) { return problem }
                if partial.count == width + length {
                    partial.withUnsafeBufferPointer { frame(UnsafeBufferPointer(rebasing: $0[width...]), position) }
                    partial.removeAll(keepingCapacity: true)
                }
            }
        }
        while position < count {
            guard count - position >= width else { break }
            let length = Self.length(in: input, at: position, width: width) + offset
            if let problem = check(length) { return problem }
            guard count - position - width >= length else { break }
            let body = position + width
            frame(UnsafeBufferPointer(rebasing: input[body..<(body + length)]), body + length)
            position = body + length
        }
        if position < count { partial.append(contentsOf: UnsafeBufferPointer(rebasing: input[position..<count])) }
        return nil
    }

    private mutating func check(_ length: Int) -> Problem? {
        guard length < 0 || length > maximumFrame else { return nil }
        desynchronised = true
        partial = []
        return .badLength(length)
    }

    @inline(__always)
    private static func length(in buffer: UnsafeBufferPointer<UInt8>, at start: Int, width: Int) -> Int {
        var value = 0
        for index in start..<(start + width) { value = value << 8 | Int(buffer[index]) }
        return value
    }
}
