/// One traffic event as an `events.bin` record: a little-endian `UInt32` body length, then the body: a kind tag, the
/// time (`Int64` nanoseconds since the run started), the connection (`UInt64`) and the kind's fields (integers
/// little-endian, strings and bytes as a `UInt32` length and the bytes).
package enum EventRecordCoding {
    /// The tag of the record a writer closes a segment with: its body is the count of records before it.
    package static let endTag: UInt8 = 0xFF
    /// The largest record body a reader accepts (a read is at most a few MiB).
    package static let largestRecord = 64 << 20

    /// What went wrong reading a record.
    package struct Malformed: Error, Sendable {
        /// Why, for a message.
        package var reason: String
    }

    /// Appends `event` as one record.
    package static func append(_ event: TrafficEvent, to out: inout [UInt8]) {
        let start = out.count
        out += [0, 0, 0, 0]
        var writer = Writer(out: [])
        swap(&writer.out, &out)  // no copy of what is already buffered
        encode(event, into: &writer)
        swap(&writer.out, &out)
        let length = UInt32(out.count - start - 4)
        withUnsafeBytes(of: length.littleEndian) { raw in
            for index in 0..<4 { out[start + index] = raw[index] }
        }
    }

    /// Appends the end record: `count` records came before it.
    package static func appendEnd(count: Int64, to out: inout [UInt8]) {
        var writer = Writer(out: [])
        writer.byte(endTag)
        writer.int(count)
        withUnsafeBytes(of: UInt32(writer.out.count).littleEndian) { out += $0 }
        out += writer.out
    }

    /// What one record body holds.
    package enum Decoded: Equatable, Sendable {
        case event(TrafficEvent)
        /// The writer closed the segment after `count` records.
        case end(count: Int64)
    }

    /// Decodes one record body.
    package static func decode(_ body: ArraySlice<UInt8>) throws(Malformed) -> Decoded {
        var reader = Reader(bytes: body)
        let tag = try reader.byte()
        if tag == endTag {
            let count = try reader.int()
            try reader.finish()
            return .end(count: count)
        }
        let time = try reader.int()
        let connection = UInt64(bitPattern: try reader.int())
        let kind = try decodeKind(tag, &reader)
        try reader.finish()
        return .event(TrafficEvent(time: time, connection: connection, kind: kind))
    }

    // MARK: - Kinds

    private static func encode(_ event: TrafficEvent, into writer: inout Writer) {
        func head(_ tag: UInt8) {
            writer.byte(tag)
            writer.int(event.time)
            writer.int(Int64(bitPattern: event.connection))
        }
        switch event.kind {
        case .opened(let ends):
            head(1)
            for text in [ends.proxy, ends.client, ends.listen, ends.proxyLocal, ends.server] { writer.string(text) }
        case .refused(let proxy, let reason):
            head(2)
            writer.string(proxy)
            writer.string(reason)
        case .read(let side, let bytes):
            head(3)
            writer.side(side)
            writer.bytes(bytes)
        case .written(let side, let bytes):
            head(4)
            writer.side(side)
            writer.bytes(bytes)
        case .acknowledged(let side, let upTo):
            head(5)
            writer.side(side)
            writer.int(upTo)
        case .acknowledgedAfterClose(let side, let upTo):
            head(6)
            writer.side(side)
            writer.int(upTo)
        case .closed(let side, let how):
            head(7)
            writer.side(side)
            writer.string(how.rawValue)
        case .faultStarted(let mark):
            head(8)
            writer.mark(mark)
        case .faultEnded(let mark):
            head(9)
            writer.mark(mark)
        case .stopping:
            head(10)
        case .path(.radioPromotion(let waited)):
            head(11)
            writer.byte(1)
            writer.int(waited)
        case .path(.natExpired(let idleTimeout, let idleFor)):
            head(11)
            writer.byte(2)
            writer.int(idleTimeout)
            writer.int(idleFor)
        case .path(.retransmission(let direction, let delay)):
            head(11)
            writer.byte(3)
            writer.byte(direction == .upstream ? 0 : 1)
            writer.int(delay)
        case .path(.rebound):
            head(11)
            writer.byte(4)
        case .path(.acknowledgementsCut(let side, let upTo)):
            head(11)
            writer.byte(5)
            writer.side(side)
            writer.int(upTo)
        case .path(.deadPathSeen(let seen)):
            head(11)
            writer.byte(6)
            writer.int(seen.lasted)
            writer.byte(seen.inKernel ? 1 : 0)
            for leg in [seen.client, seen.server] {
                writer.int(leg.sent)
                writer.int(leg.acknowledged)
                writer.int(leg.retransmissions)
                writer.int(leg.closedAfter ?? -1)
                writer.string(leg.closedHow?.rawValue ?? "")
            }
        case .tls(.negotiated(let alpn, let version, let suite)):
            head(12)
            writer.byte(1)
            writer.byte(alpn == nil ? 0 : 1)
            writer.string(alpn ?? "")
            writer.string(version)
            writer.string(suite)
        case .tls(.problem(let reason)):
            head(12)
            writer.byte(2)
            writer.string(reason)
        }
    }

    private static func decodeKind(_ tag: UInt8, _ reader: inout Reader) throws(Malformed) -> TrafficEvent.Kind {
        switch tag {
        case 1:
            let texts = [try reader.string(), try reader.string(), try reader.string(), try reader.string(), try reader.string()]
            return .opened(ConnectionEndpoints(proxy: texts[0], client: texts[1], listen: texts[2], proxyLocal: texts[3], server: texts[4]))
        case 2: return .refused(proxy: try reader.string(), reason: try reader.string())
        case 3: return .read(try reader.side(), try reader.bytes())
        case 4: return .written(try reader.side(), try reader.bytes())
        case 5: return .acknowledged(try reader.side(), upTo: try reader.int())
        case 6: return .acknowledgedAfterClose(try reader.side(), upTo: try reader.int())
        case 7:
            let side = try reader.side()
            let text = try reader.string()
            guard let how = TrafficEvent.CloseKind(rawValue: text) else { throw Malformed(reason: "an unknown close kind '\(text)'") }
            return .closed(side, how)
        case 8: return .faultStarted(try reader.mark())
        case 9: return .faultEnded(try reader.mark())
        case 10: return .stopping
        case 11:
            switch try reader.byte() {
            case 1: return .path(.radioPromotion(waited: try reader.int()))
            case 2: return .path(.natExpired(idleTimeout: try reader.int(), idleFor: try reader.int()))
            case 3:
                let direction: Direction = try reader.byte() == 0 ? .upstream : .downstream
                return .path(.retransmission(direction, delay: try reader.int()))
            case 4: return .path(.rebound)
            case 5: return .path(.acknowledgementsCut(try reader.side(), upTo: try reader.int()))
            case 6:
                let lasted = try reader.int()
                let inKernel = try reader.byte() == 1
                var legs: [DeadPathLeg] = []
                for _ in 0..<2 {
                    let (sent, acknowledged) = (try reader.int(), try reader.int())
                    let (retransmissions, closedAfter) = (try reader.int(), try reader.int())
                    let how = try reader.string()
                    guard how.isEmpty || TrafficEvent.CloseKind(rawValue: how) != nil else {
                        throw Malformed(reason: "an unknown close kind '\(how)'")
                    }
                    legs.append(
                        DeadPathLeg(
                            sent: sent,
                            acknowledged: acknowledged,
                            retransmissions: retransmissions,
                            closedAfter: closedAfter < 0 ? nil : closedAfter,
                            closedHow: TrafficEvent.CloseKind(rawValue: how)
                        )
                    )
                }
                return .path(.deadPathSeen(DeadPathSeen(lasted: lasted, inKernel: inKernel, client: legs[0], server: legs[1])))
            case let other: throw Malformed(reason: "an unknown path event \(other)")
            }
        case 12:
            switch try reader.byte() {
            case 1:
                let hasALPN = try reader.byte() == 1
                let alpn = try reader.string()
                return .tls(.negotiated(alpn: hasALPN ? alpn : nil, version: try reader.string(), suite: try reader.string()))
            case 2: return .tls(.problem(try reader.string()))
            case let other: throw Malformed(reason: "an unknown TLS note \(other)")
            }
        default:
            throw Malformed(reason: "an unknown record kind \(tag)")
        }
    }

    // MARK: - Bytes

    struct Writer {
        var out: [UInt8]
        mutating func byte(_ value: UInt8) { out.append(value) }
        mutating func int(_ value: Int64) { withUnsafeBytes(of: value.littleEndian) { out += $0 } }
        mutating func length(_ value: Int) { withUnsafeBytes(of: UInt32(value).littleEndian) { out += $0 } }
        mutating func bytes(_ value: [UInt8]) {
            length(value.count)
            out += value
        }
        mutating func string(_ value: String) { bytes(Array(value.utf8)) }
        mutating func side(_ value: Side) { byte(value == .client ? 0 : 1) }
        mutating func mark(_ value: FaultMark) {
            string(value.kind)
            int(Int64(value.occurrence))
            string(value.detail)
            // Then, only when set: its proxy ("" for none when what follows is set), and the connections it was
            // aimed at (1, a count and the ids) or the draw that picks them (2, the probability's bits and the seed).
            // A mark with neither is as an older writer wrote it.
            guard value.proxy != nil || value.connections != nil || value.draw != nil else { return }
            string(value.proxy ?? "")
            if let connections = value.connections {
                byte(1)
                int(Int64(connections.count))
                for id in connections { int(Int64(bitPattern: id)) }
            } else if let draw = value.draw {
                byte(2)
                int(Int64(bitPattern: draw.probability.bitPattern))
                int(Int64(bitPattern: draw.seed))
            }
        }
    }

    struct Reader {
        let body: ArraySlice<UInt8>
        var position: Int

        init(bytes: ArraySlice<UInt8>) {
            body = bytes
            position = bytes.startIndex
        }

        mutating func take(_ count: Int) throws(Malformed) -> ArraySlice<UInt8> {
            guard count >= 0, body.endIndex - position >= count else {
                throw Malformed(reason: "a record ends inside a field (\(count) bytes wanted, \(body.endIndex - position) left)")
            }
            defer { position += count }
            return body[position..<(position + count)]
        }

        mutating func byte() throws(Malformed) -> UInt8 { try take(1).first! }

        mutating func int() throws(Malformed) -> Int64 {
            var value: UInt64 = 0
            for (shift, byte) in try take(8).enumerated() { value |= UInt64(byte) << (8 * UInt64(shift)) }
            return Int64(bitPattern: value)
        }

        mutating func length() throws(Malformed) -> Int {
            var value = 0
            for (shift, byte) in try take(4).enumerated() { value |= Int(byte) << (8 * shift) }
            return value
        }

        mutating func bytes() throws(Malformed) -> [UInt8] { Array(try take(try length())) }

        mutating func string() throws(Malformed) -> String {
            let raw = try bytes()
            guard let text = String(validating: raw, as: UTF8.self) else { throw Malformed(reason: "a string that is not UTF-8") }
            return text
        }

        mutating func side() throws(Malformed) -> Side {
            switch try byte() {
            case 0: return .client
            case 1: return .server
            case let other: throw Malformed(reason: "an unknown side \(other)")
            }
        }

        mutating func mark() throws(Malformed) -> FaultMark {
            var mark = FaultMark(kind: try string(), occurrence: Int(try int()), detail: try string())
            guard position < body.endIndex else { return mark }
            let proxy = try string()
            mark.proxy = proxy.isEmpty ? nil : proxy
            guard position < body.endIndex else { return mark }
            switch try byte() {
            case 1:
                let count = try int()
                guard count >= 0, count <= Int64(body.endIndex - position) else {
                    throw Malformed(reason: "a fault mark aimed at \(count) connections in \(body.endIndex - position) bytes")
                }
                var ids: [ConnectionID] = []
                for _ in 0..<count { ids.append(ConnectionID(bitPattern: try int())) }
                mark.connections = ids
            case 2:
                mark.draw = ConnectionDraw(probability: Double(bitPattern: UInt64(bitPattern: try int())), seed: UInt64(bitPattern: try int()))
            case let other:
                throw Malformed(reason: "a fault mark's target kind \(other)")
            }
            return mark
        }

        func finish() throws(Malformed) {
            guard position == body.endIndex else { throw Malformed(reason: "\(body.endIndex - position) bytes left over in a record") }
        }
    }
}
