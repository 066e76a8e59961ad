import ChaosCore
import NIOCore

/// Splits a TCP byte stream into lines (without the `\n`, and without a trailing `\r`).
struct LineFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    /// Longest line accepted; a peer that sends more without a newline is cut off.
    let maximumLength: Int
    private var scanned = 0

    init(maximumLength: Int = 1 << 20) {
        self.maximumLength = maximumLength
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let view = buffer.readableBytesView
        let searchStart = view.index(view.startIndex, offsetBy: scanned)
        guard let newline = view[searchStart...].firstIndex(of: UInt8(ascii: "\n")) else {
            scanned = view.count
            if scanned > maximumLength {
                throw ChaosError.badInput("a line longer than \(maximumLength) bytes")
            }
            return .needMoreData
        }
        scanned = 0
        let offset = newline - view.startIndex
        let lineEnd = buffer.readerIndex + offset + 1
        var length = offset
        if length > 0, view[newline - 1] == UInt8(ascii: "\r") { length -= 1 }
        guard let line = buffer.readSlice(length: length) else { return .needMoreData }
        buffer.moveReaderIndex(to: lineEnd)
        context.fireChannelRead(Self.wrapInboundOut(line))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        buffer.clear()  // an unterminated last line is not a message
        return .needMoreData
    }
}
