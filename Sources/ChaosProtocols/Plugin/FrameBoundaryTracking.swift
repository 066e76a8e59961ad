/// Follows where the frames of one direction of a connection begin, reading only frame headers and skipping
/// payloads by their length, so that the proxy can put a frame of its own between two frames without ever
/// cutting one. Each plug-in whose frames the proxy follows has one; it keeps a few bytes of state.
package protocol FrameBoundaryTracking: Sendable {
    /// Whether the next byte would begin a frame: a frame of the proxy's own may go here.
    var atBoundary: Bool { get }
    /// Follows `bytes`; with `stopAtBoundary`, stops at the first boundary (at once when already at one).
    /// Returns how many bytes it consumed.
    mutating func advance(_ bytes: UnsafeRawBufferPointer, stopAtBoundary: Bool) -> Int
}

/// A tracker that follows its bytes one step at a time (a byte of a head or a header, a run of payload); the loop
/// that stops at a boundary is shared.
protocol SteppingTracker: FrameBoundaryTracking {
    /// Follows the bytes from `index` by one step (at least one byte, or a change of phase); returns the new index.
    mutating func step(_ bytes: UnsafeRawBufferPointer, from index: Int) -> Int
}

extension SteppingTracker {
    mutating func advance(_ bytes: UnsafeRawBufferPointer, stopAtBoundary: Bool) -> Int {
        var index = 0
        while index < bytes.count {
            if stopAtBoundary, atBoundary { return index }
            index = step(bytes, from: index)
        }
        return index
    }
}

/// The tracker of a protocol whose frames the proxy does not follow: never at a boundary.
struct NoFrameBoundaries: FrameBoundaryTracking {
    var atBoundary: Bool { false }
    mutating func advance(_ bytes: UnsafeRawBufferPointer, stopAtBoundary: Bool) -> Int { bytes.count }
}

/// An HTTP/1.1 head (an upgrade request or its answer) up to its empty line: how much of the closing CRLF CRLF
/// has matched so far. Shared by the trackers of the protocols that start with one.
struct HTTPHeadMatcher: Sendable, Equatable {
    private var matched = 0

    /// Follows one byte; true once the head's empty line is complete.
    @inline(__always)
    mutating func ends(with byte: UInt8) -> Bool {
        let expected: UInt8 = matched % 2 == 0 ? 13 : 10
        matched = byte == expected ? matched + 1 : (byte == 13 ? 1 : 0)
        return matched == 4
    }
}

/// Skips a payload of a known length, whatever the reads: the part shared by the trackers.
enum PayloadSkip {
    /// Consumes up to `remaining` bytes of `bytes` from `index`; returns the new index and what is left.
    @inline(__always)
    static func skip(_ bytes: UnsafeRawBufferPointer, from index: Int, remaining: UInt64) -> (index: Int, left: UInt64) {
        let take = Int(min(remaining, UInt64(bytes.count - index)))
        return (index + take, remaining - UInt64(take))
    }
}
