import ChaosCore
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import ChaosProxy

/// A UDP relay's turn of writes (``DatagramBatch``): runs of equal-sized datagrams to one address go as one segmented
/// message (UDP GSO) that the kernel cuts again, so the receiver reads the same datagrams in the same order; anything
/// that breaks a run starts a new message; and nothing recorded goes segmented.
@Suite("UDP relay: a turn's datagrams batched")
struct DatagramBatchTests {
    /// `sizes` datagrams written through one batch from a real NIO socket to a real receiving socket, flushed as a
    /// relay's turn ends: what the receiver read, in order (each datagram's first byte is its index).
    private func received(_ sizes: [Int], segments: Bool, secondAddressFor second: Int? = nil) async throws -> [[UInt8]] {
        let receivers = [try UDPTestSocket(), try UDPTestSocket()]
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await DatagramBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let targets = try receivers.map { try SocketAddress(ipAddress: "127.0.0.1", port: $0.port) }
        try await channel.eventLoop.submit {
            var batch = DatagramBatch(segments: segments)
            for (index, size) in sizes.enumerated() {
                let data = ByteBuffer(bytes: [UInt8(index)] + [UInt8](repeating: 0x5A, count: size - 1))
                _ = batch.write(AddressedEnvelope(remoteAddress: targets[index == second ? 1 : 0], data: data), to: channel)
            }
            batch.flushAll()
        }.get()
        let got = receivers[0].drain(quiet: 0.3).map(\.bytes) + receivers[1].drain(quiet: 0.1).map(\.bytes)
        try await channel.close()
        try await group.shutdownGracefully()
        return got
    }

    @Test(
        "segmented where the kernel can: 100 datagrams of 1,200 bytes and a short last one arrive as 101 datagrams, in order, each its own size",
        .enabled(if: System.supportsUDPSegmentationOffload)
    )
    func segmentedRunsArriveAsTheirDatagrams() async throws {
        let sizes = [Int](repeating: 1_200, count: 100) + [300]
        let got = try await received(sizes, segments: true)
        #expect(got.map(\.count) == sizes)
        #expect(got.map { Int($0[0]) } == Array(0..<101))
    }

    @Test("a shorter datagram ends a run, a longer one starts a new one; another address keeps its own datagrams; order kept per address")
    func runsBreak() async throws {
        let sizes = [1_000, 1_000, 400, 1_000, 1_200, 1_200, 50, 1_200]
        for segments in [true, false] where segments == false || System.supportsUDPSegmentationOffload {
            let got = try await received(sizes, segments: segments, secondAddressFor: 7)
            #expect(got.map(\.count) == sizes, "segments \(segments)")
            #expect(got.map { Int($0[0]) } == Array(0..<8), "segments \(segments)")
        }
    }

    @Test("a write that sends nothing (its socket closed meanwhile) is told with every datagram it carried: drops to count, not silence")
    func failedWritesAreTold() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await DatagramBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let target = try SocketAddress(ipAddress: "127.0.0.1", port: 9)
        let failed = Mutex<[Int]>([])
        for segments in [true, false] where segments == false || System.supportsUDPSegmentationOffload {
            failed.withLock { $0 = [] }
            let closed = try await DatagramBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
            try await closed.close()
            try await channel.eventLoop.submit {
                var batch = DatagramBatch(segments: segments) { count in failed.withLock { $0.append(count) } }
                // Three of one size (a run when segmented), then a shorter one.
                for size in [100, 100, 100, 40] {
                    _ = batch.write(AddressedEnvelope(remoteAddress: target, data: ByteBuffer(repeating: 1, count: size)), to: closed)
                }
                batch.flushAll()
            }.get()
            try await waitUntil("every failed write told") { failed.withLock { $0.reduce(0, +) } == 4 }
            #expect(failed.withLock { $0 } == (segments ? [4] : [1, 1, 1, 1]), "segments \(segments)")
        }
        try await channel.close()
        try await group.shutdownGracefully()
    }

    @Test("a message carries at most 64 datagrams and 65,000 bytes")
    func messagesAreBounded() {
        let address = try! SocketAddress(ipAddress: "127.0.0.1", port: 9)
        var message = DatagramBatch.Message(AddressedEnvelope(remoteAddress: address, data: ByteBuffer(repeating: 1, count: 100)), segmented: true)
        var taken = 1
        while message.append(AddressedEnvelope(remoteAddress: address, data: ByteBuffer(repeating: 1, count: 100))) { taken += 1 }
        #expect(taken == DatagramBatch.segmentsPerMessage && message.envelope.metadata?.segmentSize == 100)
        var large = DatagramBatch.Message(AddressedEnvelope(remoteAddress: address, data: ByteBuffer(repeating: 1, count: 9_000)), segmented: true)
        taken = 1
        while large.append(AddressedEnvelope(remoteAddress: address, data: ByteBuffer(repeating: 1, count: 9_000))) { taken += 1 }
        #expect(taken == 7 && large.bytes.readableBytes <= DatagramBatch.bytesPerMessage)
        let single = DatagramBatch.Message(AddressedEnvelope(remoteAddress: address, data: ByteBuffer(repeating: 1, count: 10)), segmented: false)
        #expect(single.envelope.metadata == nil, "one datagram goes as it is")
    }

    @Test("nothing recorded goes segmented (a capture on the host would see one large datagram), nor with CHAOS_UDP_GSO=0")
    func segmentsOnlyWhereNothingRecords() {
        #expect(!DatagramBatch.segmentsWanted(recording: true, environment: [:]))
        #expect(!DatagramBatch.segmentsWanted(recording: false, environment: ["CHAOS_UDP_GSO": "0"]))
        #expect(DatagramBatch.segmentsWanted(recording: false, environment: [:]) == System.supportsUDPSegmentationOffload)
    }
}
