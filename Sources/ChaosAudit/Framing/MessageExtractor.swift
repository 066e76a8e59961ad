import ChaosCore
import Foundation

/// What the audit needs from one message: plain values (no reference counting as it is passed on).
struct MessageFields {
    /// The sequence number, when the message has one.
    var seq: Int64?
    /// A cumulative acknowledgement of the other direction, when the message carries one.
    var ack: Int64?
    /// The logical stream name's bytes: in place in the frame, or (escapes, text format, a protobuf number) in the
    /// extractor's scratch buffer. Valid only while the frame is and until the extractor reads the next message.
    var stream: UnsafeBufferPointer<UInt8>?
    /// The bytes of the receiver's resume point (`fanout.resume`: a JSON object of each sender's highest seq), in place
    /// in the frame and valid only while it is; nil when the message has none.
    var resume: UnsafeBufferPointer<UInt8>?
    /// The message matched an `ignore` rule.
    var ignored = false
    /// The message could not be read in the declared format.
    var undecodable = false
}

/// Reads seq, stream, ack and the `ignore` fields from one frame, for `format: json` (a byte scanner),
/// `format: text` (a regular expression with named groups) or `format: protobuf` (field-number paths such as
/// `2` or `4.1`, read from the wire format with no schema).
/// A class: the audit reads it once per message without a uniqueness check, and what it reuses (the scanner's spans,
/// a scratch buffer for stream names that had to be copied) is its own.
final class MessageExtractor {
    private enum Reader {
        case json(JSONFieldScanner)
        case text(NSRegularExpression)
        case protobuf(ProtobufFieldScanner)
    }

    private let reader: Reader
    /// ``reader``'s JSON scanner, read per message with no reference counting (``reader`` keeps it).
    private unowned(unsafe) let jsonScanner: JSONFieldScanner?
    private let hasStream: Bool
    private let hasAck: Bool
    /// The index among the scanned fields of `fanout.resume` (JSON only; nil: not read).
    private let resumeField: Int?
    /// For each ignore rule: the field's index among the scanned fields and the values that exclude a message.
    private let ignoreRules: [(field: Int, values: [[UInt8]])]
    /// The same rules flat, for the JSON hot path (plain integers: no reference counting per value compared): per
    /// value, its field's index, and where its bytes lie in ``ignoreBytes``.
    private let ignoreValues: [(field: Int, start: Int, count: Int)]
    private let ignoreBytes: [UInt8]
    /// Field names in scanning order: seq, stream, ack, the ignore fields, then `fanout.resume`.
    private let fieldNames: [String]
    /// Stream names that had to be copied (escapes, text, protobuf numbers), one at a time; grown as needed.
    private var scratch = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 64)
    /// Per scanned field: whether it is a `sint32` / `sint64` (a zigzag varint), as a descriptor set says.
    private let zigzag: [Bool]

    /// Builds the extractor for `spec`; throws `ChaosError.badInput` for formats it cannot read. `zigzag` names
    /// the protobuf fields (as field-number paths) that are `sint32` / `sint64`.
    init(spec: ProtocolSpec, zigzag: Set<String> = []) throws {
        // A stream named by the request that opened it (`header:` / `query:`) is not a field of the message.
        let streamField: String? = if case .field(let name) = spec.streamSource { name } else { nil }
        var names = [spec.seq, streamField ?? "", spec.ack ?? ""]
        hasStream = streamField != nil
        hasAck = spec.ack != nil
        var rules: [(Int, [[UInt8]])] = []
        for (field, values) in spec.ignore.sorted(by: { $0.key < $1.key }) {
            let name = field == "type" ? spec.type : field
            rules.append((names.count, values.map { Array($0.utf8) }))
            names.append(name)
        }
        ignoreRules = rules
        if let resume = spec.fanout?.resume, spec.format == .json {
            resumeField = names.count
            names.append(resume)
        } else {
            resumeField = nil
        }
        var flat: [(Int, Int, Int)] = []
        var flatBytes: [UInt8] = []
        for (field, values) in rules {
            for value in values {
                flat.append((field, flatBytes.count, value.count))
                flatBytes += value
            }
        }
        ignoreValues = flat
        ignoreBytes = flatBytes
        fieldNames = names
        self.zigzag = names.map { zigzag.contains($0) }
        switch spec.format {
        case .json:
            reader = .json(JSONFieldScanner(fields: names))
        case .text:
            guard let pattern = spec.regex, !pattern.isEmpty else {
                throw ChaosError.badInput("protocol.format text needs protocol.regex: a regular expression with a named group (?<\(spec.seq)>...)")
            }
            let expression: NSRegularExpression
            do { expression = try NSRegularExpression(pattern: pattern) } catch {
                throw ChaosError.badInput("protocol.regex is not a valid regular expression: \(pattern)")
            }
            guard pattern.contains("(?<\(spec.seq)>") else {
                throw ChaosError.badInput("protocol.regex must have a named group (?<\(spec.seq)>...) for the sequence number")
            }
            reader = .text(expression)
        case .protobuf:
            for name in names where !name.isEmpty && ProtobufFieldScanner.path(name) == nil {
                throw ChaosError.badInput("protocol.format protobuf reads fields by number path (2, or 4.1 for a nested field), found '\(name)'")
            }
            reader = .protobuf(ProtobufFieldScanner(fields: names))
        }
        jsonScanner = if case .json(let scanner) = reader { scanner } else { nil }
    }

    deinit { scratch.deallocate() }

    /// `bytes` copied into the scratch buffer: valid until the next call.
    private func hold<C: Collection<UInt8>>(_ bytes: C) -> UnsafeBufferPointer<UInt8> {
        if bytes.count > scratch.count {
            scratch.deallocate()
            scratch = .allocate(capacity: max(bytes.count, 2 * scratch.count))
        }
        let (_, end) = scratch.initialize(from: bytes)
        return UnsafeBufferPointer(rebasing: scratch[..<end])
    }

    /// Reads the fields of one frame.
    @inline(__always)
    func extract(_ frame: UnsafeBufferPointer<UInt8>) -> MessageFields {
        if let jsonScanner { return extractJSON(frame, jsonScanner) }
        switch reader {
        case .json(let scanner): return extractJSON(frame, scanner)
        case .text(let expression): return extractText(frame, expression)
        case .protobuf(let scanner): return extractProtobuf(frame, scanner)
        }
    }

    private func extractJSON(_ frame: UnsafeBufferPointer<UInt8>, _ scanner: JSONFieldScanner) -> MessageFields {
        var fields = MessageFields()
        guard scanner.scan(frame) else {
            fields.undecodable = true
            return fields
        }
        let spans = UnsafeBufferPointer(scanner.spans)
        if !ignoreValues.isEmpty {
            fields.ignored = ignoreValues.withUnsafeBufferPointer { values in
                ignoreBytes.withUnsafeBufferPointer { bytes in
                    for value in values {
                        let span = spans[value.field]
                        if span.isPresent, span.end &- span.start == value.count,
                            value.count == 0 || memcmp(frame.baseAddress! + span.start, bytes.baseAddress! + value.start, value.count) == 0
                        {
                            return true
                        }
                    }
                    return false
                }
            }
        }
        let seqSpan = spans[0]
        if seqSpan.isPresent {
            fields.seq = JSONFieldScanner.integer(frame, seqSpan)
            if fields.seq == nil, !fields.ignored { fields.undecodable = true }
        }
        if hasAck { fields.ack = JSONFieldScanner.integer(frame, spans[2]) }
        if let resumeField, spans[resumeField].isPresent, !spans[resumeField].isString {
            let span = spans[resumeField]
            fields.resume = UnsafeBufferPointer(rebasing: frame[span.start..<span.end])
        }
        if hasStream, spans[1].isPresent {
            let span = spans[1]
            fields.stream =
                span.hasEscapes
                ? hold(JSONFieldScanner.unescape(frame, span.start, span.end))
                : UnsafeBufferPointer(rebasing: frame[span.start..<span.end])
        }
        return fields
    }

    private func extractProtobuf(_ frame: UnsafeBufferPointer<UInt8>, _ scanner: ProtobufFieldScanner) -> MessageFields {
        var fields = MessageFields()
        guard scanner.scan(frame) else {
            fields.undecodable = true
            return fields
        }
        let protobufValues = UnsafeBufferPointer(scanner.values)
        for rule in ignoreRules {
            guard let value = protobufValues[rule.field] else { continue }
            let text: [UInt8] =
                switch value {
                case .bytes(let start, let end): Array(frame[start..<end])
                default: Array(String(value.integer(zigzag: zigzag[rule.field]) ?? 0).utf8)
                }
            if rule.values.contains(text) { fields.ignored = true }
        }
        if let seq = protobufValues[0] {
            fields.seq = seq.integer(zigzag: zigzag[0])
            if fields.seq == nil, !fields.ignored { fields.undecodable = true }
        }
        if hasAck { fields.ack = protobufValues[2]?.integer(zigzag: zigzag[2]) }
        if hasStream, let stream = protobufValues[1] {
            switch stream {
            case .bytes(let start, let end): fields.stream = UnsafeBufferPointer(rebasing: frame[start..<end])
            default: fields.stream = hold(String(stream.integer(zigzag: zigzag[1]) ?? 0).utf8)
            }
        }
        return fields
    }

    private func extractText(_ frame: UnsafeBufferPointer<UInt8>, _ expression: NSRegularExpression) -> MessageFields {
        var fields = MessageFields()
        let text = String(decoding: frame, as: UTF8.self)
        let whole = NSRange(text.startIndex..., in: text)
        guard let match = expression.firstMatch(in: text, range: whole) else {
            fields.undecodable = true
            return fields
        }
        func group(_ name: String) -> Substring? {
            guard !name.isEmpty else { return nil }
            let range = match.range(withName: name)
            guard range.location != NSNotFound, let swiftRange = Range(range, in: text) else { return nil }
            return text[swiftRange]
        }
        for rule in ignoreRules {
            if let value = group(fieldNames[rule.field]), rule.values.contains(Array(value.utf8)) { fields.ignored = true }
        }
        if let seqText = group(fieldNames[0]) {
            fields.seq = Int64(seqText)
            if fields.seq == nil, !fields.ignored { fields.undecodable = true }
        }
        if hasAck, let ackText = group(fieldNames[2]) { fields.ack = Int64(ackText) }
        if hasStream, let stream = group(fieldNames[1]) { fields.stream = hold(stream.utf8) }
        return fields
    }
}
