import ChaosCore
import Foundation

extension AuditEngine {
    /// Counts a message read from a producer whose seq could not be read, and keeps the first: the report names it
    /// when nothing was audited (a `seq:` that names the wrong key).
    func sampleUnsequenced(_ frame: UnsafeBufferPointer<UInt8>, endingAt end: Int64, direction: Direction, connection: ConnectionID) {
        messageStats.unsequencedRead += 1
        guard messageStats.firstUnsequenced == nil else { return }
        let override = direction == .upstream ? spec.upstream : spec.downstream
        let seqField = override?.seq ?? spec.seq
        var keys: [String] = []
        if spec.format == .json, let object = try? JSONSerialization.jsonObject(with: Data(frame)) as? [String: Any] {
            keys = object.keys.sorted()
        }
        let text = String(decoding: frame.prefix(UnreadMessage.excerptLimit * 4), as: UTF8.self)
        let printable = String(
            text.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : Character($0) }
                .prefix(UnreadMessage.excerptLimit)
        )
        messageStats.firstUnsequenced = UnreadMessage(
            connection: connection,
            direction: direction == .upstream ? "upstream" : "downstream",
            end: end,
            excerpt: printable + (frame.count > printable.utf8.count ? "…" : ""),
            seqField: seqField,
            keys: keys
        )
    }
}
