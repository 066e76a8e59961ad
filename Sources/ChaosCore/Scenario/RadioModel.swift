/// The cellular radio's RRC state machine as an application feels it (PRODUCT §11): after `tail` with no byte in
/// either direction the radio drops to idle, and the next byte (either way) waits `promotion` for it to connect
/// again. One radio per proxy (the phone behind it) unless `perConnection`.
package struct RadioModel: Sendable, Codable, Equatable, Hashable, CustomStringConvertible {
    /// How long the first byte after an idle tail waits for the radio (idle → connected).
    package var promotion: ChaosDuration
    /// How long the radio stays connected with no byte either way.
    package var tail: ChaosDuration
    /// One radio per connection instead of one for every connection of the proxy.
    package var perConnection: Bool

    /// Creates a radio.
    package init(promotion: ChaosDuration, tail: ChaosDuration, perConnection: Bool = false) {
        self.promotion = promotion
        self.tail = tail
        self.perConnection = perConnection
    }

    /// LTE: promotion 260 ms (AT&T Video Optimizer's `lte.conf`, `T_PROMOTION=0.26`), tail 11.5 s (PRODUCT §11, after
    /// Huang et al., MobiSys 2012; Video Optimizer's DRX timers add up to 10.1 s).
    package static let lte = RadioModel(promotion: .milliseconds(260), tail: .milliseconds(11_500))
    /// 3G (UMTS): promotion 2 s, tail 14 s (Video Optimizer's 3G device profiles: IDLE→DCH 2 s on average, DCH→FACH
    /// 4 s, then FACH→IDLE 10 s).
    package static let umts = RadioModel(promotion: .seconds(Int64(2)), tail: .seconds(Int64(14)))

    /// `promotion=260ms tail=11.5s` (and `per=connection`).
    package var description: String {
        "promotion=\(promotion) tail=\(tail)" + (perConnection ? " per=connection" : "")
    }
}

/// A carrier-grade NAT's idle timeout: the default of the `cgnat` profile and of a `nat` fault that names none.
package enum CarrierNAT {
    /// 5 minutes (PRODUCT §11; docs/mobile-faults.md names the measurements behind it).
    package static let defaultIdleTimeout = ChaosDuration.seconds(Int64(300))
}
