import ChaosCore
import Testing

@testable import ChaosAudit

/// The flat pass (top-level short keys, each key first compared with the one the last message had at its place) must
/// find what the general scan finds, message after message, whatever the shapes: runs of one shape (predictions hit),
/// shapes that change mid-message (predictions dropped and learned again), white space, escaped keys, duplicate keys,
/// nested values, keys longer than a prediction holds, frames cut short and non-objects.
@Suite("JSON field scanner: the flat pass with its key predictions answers as the general scan")
struct JSONFieldScannerTests {
    static let keys = ["seq", "stream", "type", "id", "payload", "ack", "meta", "s", "a_rather_long_key_name", "se\\u0071"]

    /// One random message: mostly one of a few shapes (so predictions hold), sometimes anything.
    static func message(_ generator: inout SeededGenerator, shape: Int) -> [UInt8] {
        func value(_ depth: Int) -> String {
            switch Int.random(in: 0..<8, using: &generator) {
            case 0, 1: return "\(Int.random(in: -5...100_000, using: &generator))"
            case 2: return "\"\(String(repeating: "x", count: Int.random(in: 0...20, using: &generator)))\""
            case 3: return #""esc\"aped\\""#
            case 4: return ["true", "null", "1.5e3", "-0"].randomElement(using: &generator)!
            case 5: return depth > 1 ? "[]" : "{\"seq\":\(value(depth + 1)),\"x\":[1,{\"a\":\"}\"}]}"
            case 6: return "\"c\(Int.random(in: 0...3, using: &generator))\""
            default: return "\(Int.random(in: 0...9, using: &generator))"
            }
        }
        let space = { (generator: inout SeededGenerator) -> String in Int.random(in: 0..<6, using: &generator) == 0 ? " " : "" }
        var order: [String]
        switch shape {
        case 0: order = ["type", "stream", "seq", "id", "payload"]
        case 1: order = ["seq", "ack", "stream"]
        case 2: order = ["a_rather_long_key_name", "seq", "type", "s"]
        default: order = (0..<Int.random(in: 0...6, using: &generator)).map { _ in keys.randomElement(using: &generator)! }
        }
        // Now and then the shape changes partway, or a key repeats.
        if !order.isEmpty, Int.random(in: 0..<5, using: &generator) == 0 {
            order[Int.random(in: 0..<order.count, using: &generator)] = keys.randomElement(using: &generator)!
        }
        var text = space(&generator) + "{" + space(&generator)
        text += order.map { key in
            "\"\(key)\"" + space(&generator) + ":" + space(&generator) + value(0) + space(&generator)
        }.joined(separator: "," + space(&generator))
        text += "}"
        var bytes = Array(text.utf8)
        switch Int.random(in: 0..<20, using: &generator) {
        case 0: bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &generator)))
        case 1: bytes = Array("[1,2]".utf8)
        default: break
        }
        return bytes
    }

    @Test("runs of random messages: the same answer and spans as the general scan, message by message", arguments: 0..<24)
    func flatEqualsGeneral(seed: UInt64) {
        var generator = SeededGenerator(seed: seed)
        let wanted = seed.isMultiple(of: 3) ? ["seq", "stream", "", "type"] : ["seq", "stream", "ack", "type", "s"]
        let flat = JSONFieldScanner(fields: wanted)
        let general = JSONFieldScanner(fields: wanted)
        var shape = 0
        var predicted = 0
        for index in 0..<3000 {
            if Int.random(in: 0..<50, using: &generator) == 0 { shape = Int.random(in: 0...3, using: &generator) }
            let message = Self.message(&generator, shape: shape)
            let (found, reference) = message.withUnsafeBufferPointer { (flat.scan($0), general.scan($0, flat: false)) }
            #expect(found == reference, "message \(index): \(String(decoding: message, as: UTF8.self))")
            if reference {
                #expect(Array(flat.spans) == Array(general.spans), "message \(index): \(String(decoding: message, as: UTF8.self))")
            }
            predicted += flat.predictionCount
        }
        #expect(predicted > 3000, "the flat pass predicted keys (\(predicted) predictions held over the run)")
    }

    @Test("a key that matches a prediction byte for byte is read as that key; one that differs after the colon's place is not")
    func predictionIsExact() {
        let scanner = JSONFieldScanner(fields: ["seq", "stream"])
        let first = Array(#"{"stream":"a","seq":1,"payload":"xxxxxxxxxxxxxxxx"}"#.utf8)
        let second = Array(#"{"streams":"b","seq":2,"payload":"xxxxxxxxxxxxxxxx"}"#.utf8)
        #expect(first.withUnsafeBufferPointer { scanner.scan($0) })
        #expect(scanner.predictionCount >= 2)
        #expect(second.withUnsafeBufferPointer { scanner.scan($0) })
        #expect(!scanner.spans[1].isPresent, "\"streams\" is not \"stream\"")
        #expect(scanner.spans[0] == FieldSpan(start: 21, end: 22, isString: false, hasEscapes: false))
    }
}
