import Foundation
import Synchronization

/// `integrity --port P --bytes N`: streams N bytes of a non-repeating pattern to an echo and
/// checks that every byte comes back identical and in place (a lost, duplicated, reordered or
/// changed byte fails), then that the echo's FIN follows the last byte. Prints OK and MB/s.
enum Integrity {
    static let blockSize = 1 << 16

    static func run(_ arguments: BenchArguments) throws {
        let port = try arguments.port()
        let total = try arguments.integer("bytes", default: 1 << 30)
        let socket = try BlockingSocket.connect(host: arguments.string("host", default: "127.0.0.1"), port: port)
        defer { socket.close() }
        let writerError = Mutex<String?>(nil)
        let written = DispatchGroup()
        written.enter()
        let start = MonotonicClock.nanoseconds()
        let writer = Thread {
            defer { written.leave() }
            do {
                try send(total, on: socket)
                socket.shutdownOutput()
            } catch {
                writerError.withLock { $0 = BenchError.describe(error) }
            }
        }
        writer.start()
        let received = try receiveAndCheck(total, on: socket)
        written.wait()
        let seconds = MonotonicClock.seconds(since: start)
        if let failure = writerError.withLock({ $0 }) { throw BenchError("writer: \(failure)") }
        guard received.mismatchAt == nil else {
            throw BenchError("FAILED: byte \(received.mismatchAt!) differs from what was sent")
        }
        guard received.count == total else {
            throw BenchError("FAILED: \(received.count) of \(total) bytes came back before the connection ended")
        }
        guard received.endedWithFIN else { throw BenchError("FAILED: more bytes came back than were sent") }
        print("integrity=OK bytes=\(total) mb_per_s=\(Int((Double(total) / 1e6 / seconds).rounded()))")
    }

    /// The pattern's block `index`: 64-bit words of splitmix64 over the word's position.
    static func fill(_ block: UnsafeMutableRawBufferPointer, index: Int) {
        let words = block.bindMemory(to: UInt64.self)
        let first = UInt64(index) * UInt64(blockSize / 8)
        for word in 0..<words.count { words[word] = splitmix(first + UInt64(word)).littleEndian }
    }

    static func splitmix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private static func send(_ total: Int, on socket: BlockingSocket) throws {
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: blockSize, alignment: 8)
        defer { block.deallocate() }
        var offset = 0
        var index = 0
        while offset < total {
            fill(block, index: index)
            let length = min(blockSize, total - offset)
            try socket.writeAll(UnsafeRawBufferPointer(rebasing: block[..<length]))
            offset += length
            index += 1
        }
    }

    private static func receiveAndCheck(
        _ total: Int,
        on socket: BlockingSocket
    ) throws
        -> (count: Int, mismatchAt: Int?, endedWithFIN: Bool)
    {
        let expected = UnsafeMutableRawBufferPointer.allocate(byteCount: blockSize, alignment: 8)
        let incoming = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 18, alignment: 8)
        defer {
            expected.deallocate()
            incoming.deallocate()
        }
        var position = 0
        fill(expected, index: 0)
        while true {
            let count = try socket.readSome(into: incoming)
            if count == 0 { return (position, nil, true) }
            if position + count > total { return (position + count, nil, false) }
            var consumed = 0
            while consumed < count {
                let inBlock = position % blockSize
                let length = min(count - consumed, blockSize - inBlock)
                if memcmp(incoming.baseAddress! + consumed, expected.baseAddress! + inBlock, length) != 0 {
                    for offset in 0..<length where incoming[consumed + offset] != expected[inBlock + offset] {
                        return (position, position + offset, false)
                    }
                }
                consumed += length
                position += length
                if position % blockSize == 0 { fill(expected, index: position / blockSize) }
            }
        }
    }
}
