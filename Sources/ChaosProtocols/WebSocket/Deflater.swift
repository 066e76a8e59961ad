import CZlib

/// The sending side of permessage-deflate (RFC 7692 7.2.1): a raw deflate stream (system zlib) that compresses
/// each message, flushes it with Z_SYNC_FLUSH and removes the trailing 00 00 ff ff. With `contextTakeover` false
/// each message starts from an empty window. What ``Inflater`` reverses; tests and benchmarks build frames with it.
package final class Deflater {
    private let stream: UnsafeMutablePointer<z_stream>
    private var output = [UInt8](repeating: 0, count: 16 * 1024)
    /// Whether the window carries over from message to message.
    package let contextTakeover: Bool

    /// A compressor with an LZ77 window of 2^`windowBits` bytes (9...15); nil when zlib cannot start one.
    package init?(windowBits: Int = 15, contextTakeover: Bool = true) {
        self.contextTakeover = contextTakeover
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        guard czlib_deflate_init2(stream, 6, -Int32(windowBits), 8) == Z_OK else {
            stream.deallocate()
            return nil
        }
    }

    deinit {
        deflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// The compressed payload of one message (what goes into its frames, RSV1 set on the first).
    package func compress(_ message: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        var input = message
        input.withUnsafeMutableBufferPointer { inBuffer in
            stream.pointee.next_in = inBuffer.baseAddress
            stream.pointee.avail_in = UInt32(inBuffer.count)
            repeat {
                let produced = output.withUnsafeMutableBufferPointer { outBuffer in
                    stream.pointee.next_out = outBuffer.baseAddress
                    stream.pointee.avail_out = UInt32(outBuffer.count)
                    _ = deflate(stream, Z_SYNC_FLUSH)
                    return outBuffer.count - Int(stream.pointee.avail_out)
                }
                result += output[..<produced]
            } while stream.pointee.avail_out == 0
        }
        if !contextTakeover { deflateReset(stream) }
        if result.suffix(4) == [0, 0, 0xFF, 0xFF] { result.removeLast(4) }
        return result
    }
}
