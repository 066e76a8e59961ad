/// What a protocol promises about one message's delivery, when it says so per message (a QoS): the audit judges
/// a stream by the weakest promise its messages carried.
package enum DeliveryContract: String, Sendable, Codable, Equatable, Comparable, CaseIterable {
    /// It may be lost (QoS 0): a loss is counted apart (`lost_qos0`) and fails only where `expect` says so.
    case atMostOnce = "at-most-once"
    /// It must arrive, and may arrive twice (QoS 1).
    case atLeastOnce = "at-least-once"
    /// It must reach the application once (QoS 2).
    case exactlyOnce = "exactly-once"

    /// Weaker first: a stream that mixes them is judged by the weakest.
    package static func < (lhs: DeliveryContract, rhs: DeliveryContract) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
