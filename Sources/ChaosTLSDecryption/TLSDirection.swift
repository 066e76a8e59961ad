/// One direction of a TLS conversation: the bytes not yet a whole record, the cipher it is under, its handshake
/// messages being gathered, and the map from TCP offsets to plaintext offsets at each record's end.
struct TLSDirection {
    enum Phase {
        /// Records are in the clear (the handshake's start, and TLS 1.2 until ChangeCipherSpec).
        case clear
        /// Records are protected by `cipher`.
        case protected
        /// Nothing more is decrypted (a problem was reported).
        case stopped
    }

    /// Client → server.
    let towardServer: Bool
    var phase = Phase.clear
    var cipher: RecordCipher?
    /// TLS 1.2: the write key that ChangeCipherSpec switches to.
    var pendingCipher: RecordCipher?
    /// TLS 1.3: whether the current cipher is the handshake's (a Finished switches to the application's).
    var underHandshakeKeys = false
    /// TLS 1.3: the application traffic secret in use (a KeyUpdate derives the next).
    var trafficSecret: [UInt8]?

    /// Received bytes from `bufferStart` on are not yet a whole record.
    var buffer: [UInt8] = []
    var bufferStart = 0
    /// TCP bytes of this direction taken into whole records.
    var tcpOffset: Int64 = 0
    /// Records seen (the number of the last one, for messages).
    var records = 0
    /// Whether a record was decrypted under the current handshake keys (early data is skipped before that).
    var decryptedAny = false
    var skippedEarlyData = 0

    /// A handshake message being gathered, and how many records it took so far.
    var handshake: [UInt8] = []
    var handshakeRecords = 0

    /// Plaintext application bytes handed out.
    var plaintext: Int64 = 0
    /// The receiver (the other side) had sent close_notify: plaintext after this is taken after close.
    var receiverClosed = false
    /// (TCP end, plaintext end, after the receiver closed) at each record that carried application data, oldest
    /// first from `pointsStart`.
    var points: [(tcp: Int64, plaintext: Int64, afterClose: Bool)] = []
    var pointsStart = 0
    /// The receiver's last acknowledgement, in TCP bytes.
    var acknowledged: Int64 = 0
    var coveredBeforeClose: Int64 = 0
    var coveredAfterClose: Int64 = 0
    var reportedDelivered: Int64 = 0
    var reportedAfterClose: Int64 = 0
    /// Capture loss the reassembler had counted when this direction last took bytes.
    var lossSeen = 0

    init(towardServer: Bool) { self.towardServer = towardServer }

    /// The next whole record in the buffer: its header and body, and the TCP offset of its end.
    mutating func nextRecord() -> (header: ArraySlice<UInt8>, body: ArraySlice<UInt8>, end: Int64)? {
        guard buffer.count - bufferStart >= 5 else { return nil }
        let length = Int(buffer[bufferStart + 3]) << 8 | Int(buffer[bufferStart + 4])
        guard buffer.count - bufferStart >= 5 + length else { return nil }
        let header = buffer[bufferStart..<(bufferStart + 5)]
        let body = buffer[(bufferStart + 5)..<(bufferStart + 5 + length)]
        bufferStart += 5 + length
        tcpOffset += Int64(5 + length)
        records += 1
        return (header, body, tcpOffset)
    }

    /// The length the record at the buffer's start declares, once its header is in.
    var declaredLength: Int? {
        guard buffer.count - bufferStart >= 5 else { return nil }
        return Int(buffer[bufferStart + 3]) << 8 | Int(buffer[bufferStart + 4])
    }

    /// Forgets the records already taken (called once per batch of bytes).
    mutating func compact() {
        if bufferStart == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 17)
            bufferStart = 0
        } else if bufferStart > 0 {
            buffer.removeFirst(bufferStart)
            bufferStart = 0
        }
    }

    /// Notes application data ending a record at TCP offset `end`.
    mutating func carried(_ count: Int, endingAt end: Int64) {
        plaintext += Int64(count)
        if let last = points.last, last.tcp == end { points.removeLast() }
        points.append((end, plaintext, receiverClosed))
    }

    /// The plaintext offsets the receiver's acknowledgement now covers, each when it moved: before the receiver
    /// closed, and after (see `TrafficEvent.Kind.acknowledgedAfterClose`).
    mutating func newlyCovered() -> (delivered: Int64?, afterClose: Int64?) {
        while pointsStart < points.count, points[pointsStart].tcp <= acknowledged {
            let point = points[pointsStart]
            if point.afterClose { coveredAfterClose = point.plaintext } else { coveredBeforeClose = point.plaintext }
            pointsStart += 1
        }
        if pointsStart > 64, pointsStart * 2 > points.count {
            points.removeFirst(pointsStart)
            pointsStart = 0
        }
        var result: (delivered: Int64?, afterClose: Int64?) = (nil, nil)
        if coveredBeforeClose > reportedDelivered {
            reportedDelivered = coveredBeforeClose
            result.delivered = coveredBeforeClose
        }
        if coveredAfterClose > max(reportedAfterClose, reportedDelivered) {
            reportedAfterClose = coveredAfterClose
            result.afterClose = coveredAfterClose
        }
        return result
    }
}
