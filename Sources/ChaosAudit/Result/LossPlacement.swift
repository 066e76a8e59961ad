/// Where the seqs a receiver lost died, for a stream that fans out through a server (a broker's topic, a chat
/// server's room): never delivered to the server by their producer, delivered to the server but never written toward
/// this receiver, or written toward the receiver and never delivered to it.
package struct LossPlacement: Sendable, Codable, Equatable {
    /// Never delivered to the server (the producer's own stream lost them too).
    package var producerToServer: Int64 = 0
    /// Delivered to the server, never written toward the receiver (a broker's queue, its in-flight limit, a clean
    /// session's time away).
    package var atServer: Int64 = 0
    /// Written toward the receiver, never delivered to it (cut on the way).
    package var serverToReceiver: Int64 = 0

    /// None yet.
    package init() {}

    /// All of them.
    package var total: Int64 { producerToServer + atServer + serverToReceiver }

    /// Adds `other`'s counts.
    package mutating func add(_ other: LossPlacement) {
        producerToServer += other.producerToServer
        atServer += other.atServer
        serverToReceiver += other.serverToReceiver
    }

    /// `at the server 3, server → receiver 1` (the places with a loss).
    package var sentence: String {
        [("producer → server", producerToServer), ("at the server", atServer), ("server → receiver", serverToReceiver)]
            .filter { $0.1 > 0 }.map { "\($0.0) \($0.1)" }.joined(separator: ", ")
    }
}
