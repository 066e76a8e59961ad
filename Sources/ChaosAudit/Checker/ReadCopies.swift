/// What the audit read from one message as its producer sent it, kept until the same message is written to the
/// consumer: the written copy then needs no second field extraction (half the audit's work on a fast stream).
struct ReadCopy {
    /// The offset just past the message's last byte in the bytes read from the producer.
    var end: Int64
    /// The message's length and a hash of its bytes: the written copy is taken for this one only if both equal.
    var length: Int
    var hash: UInt64
    /// What its fields said (seq is nil for an ignored or unsequenced message).
    var seq: Int64?
    var ack: Int64?
    var ignored: Bool
    /// The stream it belongs to on its connection (nil when no seq needed one). Unowned: the connection's
    /// `streams` keep it as long as the connection (and so these copies) live, and plain data costs no reference
    /// counting per message.
    unowned(unsafe) var stream: ConnectionStream?
}

/// The read copies of one direction of a connection, oldest first, for framings whose written bytes are exactly the
/// bytes read (``ProtocolFramer/proxyWritesOnlyRelayedBytes``). Bounded: the relay holds at most a read per
/// direction, so a few thousand messages wait here at most; past ``capacity`` (a consumer cut off while its producer
/// goes on) the oldest are dropped, and their written copies, if any come, are extracted again.
struct ReadCopies {
    static let capacity = 8_192
    private var entries: [ReadCopy] = []
    private var head = 0
    private var count = 0

    mutating func append(_ copy: ReadCopy) {
        if count == Self.capacity {
            head = (head + 1) % Self.capacity
            count -= 1
        }
        if entries.count < Self.capacity {
            entries.append(copy)
        } else {
            entries[(head + count) % Self.capacity] = copy
        }
        count += 1
    }

    /// The read copy of the written message `frame` that ends at `end` (in the written bytes, which are the read
    /// bytes), dropping older copies whose messages were never written; nil if the front copy is not this message.
    /// `sameBytes`: the written bytes of the whole message are known to be the read ones at the same offsets
    /// (``VerbatimWrites``), so its hash need not be compared.
    mutating func take(endingAt end: Int64, _ frame: UnsafeBufferPointer<UInt8>, sameBytes: Bool = false) -> ReadCopy? {
        while count > 0 {
            let front = entries[head]
            guard front.end <= end else { return nil }
            head = (head + 1) % Self.capacity
            count -= 1
            if front.end == end {
                return front.length == frame.count && (sameBytes || front.hash == Self.hash(frame)) ? front : nil
            }
        }
        return nil
    }

    /// A 64-bit hash of `bytes`, eight at a time.
    @inline(__always)
    static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        let raw = UnsafeRawBufferPointer(bytes)
        var hash: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(raw.count)
        var index = 0
        while index + 8 <= raw.count {
            hash = (hash ^ raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
            hash ^= hash >> 29
            index += 8
        }
        var tail: UInt64 = 0
        while index < raw.count {
            tail = tail << 8 | UInt64(raw[index])
            index += 1
        }
        hash = (hash ^ tail) &* 0xC4CE_B9FE_1A85_EC53
        return hash ^ (hash >> 32)
    }
}
