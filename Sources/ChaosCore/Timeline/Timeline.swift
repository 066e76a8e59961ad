/// Every fault of a run, when, where and with what parameters: a pure function of
/// (scenario, seed, duration). `chaos validate` prints it, the report records it and
/// `chaos replay` applies it again.
public struct Timeline: Sendable, Codable, Equatable {
    /// The seed it was drawn with.
    public var seed: UInt64
    /// The run length it covers.
    public var duration: ChaosDuration
    /// The occurrences, in time order.
    public var occurrences: [FaultOccurrence]

    /// Creates a timeline from already drawn occurrences (for replay).
    public init(seed: UInt64, duration: ChaosDuration, occurrences: [FaultOccurrence]) {
        self.seed = seed
        self.duration = duration
        self.occurrences = occurrences
    }

    /// Draws the timeline of `scenario` with `seed`, over `duration` (the scenario's own by default).
    public init(scenario: Scenario, seed: UInt64, duration: ChaosDuration? = nil) {
        let end = duration ?? scenario.duration
        let root = SeededGenerator(seed: seed)
        var drafts: [FaultOccurrence] = []
        for (ruleIndex, rule) in scenario.faults.enumerated() {
            var generator = root.fork("rule", UInt64(ruleIndex))
            let schedule = rule.schedule
            let stop = min(schedule.until ?? end, end)
            func emit(at start: ChaosDuration) {
                // Draw everything for this occurrence before deciding whether it happens, so that
                // probability never shifts the later draws.
                let happens = generator.nextUnit() < schedule.probability
                let effect = Self.draw(rule.parameters, with: &generator)
                var lasts: ChaosDuration = switch effect {
                case .disconnect: .zero
                case .handoff(_, _, let blackout, _): blackout
                default: schedule.lasts.map { generator.draw($0) } ?? (stop - start)
                }
                let seed = generator.next()
                guard happens, start >= schedule.after, start < stop else { return }
                if case .handoff = effect {} else { lasts = min(lasts, end - start) }
                drafts.append(FaultOccurrence(index: 0, rule: ruleIndex, at: start, lasts: lasts, proxy: rule.proxy,
                                              targets: schedule.targets, seed: seed, effect: effect))
            }
            if let at = schedule.at {
                emit(at: generator.draw(at))
            } else if let every = schedule.every {
                var start = schedule.after + generator.draw(every)
                while start < stop {
                    emit(at: start)
                    start = start + generator.draw(every)
                }
            } else {
                emit(at: schedule.after)
            }
        }
        drafts.sort { ($0.at, $0.rule) < ($1.at, $1.rule) }
        for index in drafts.indices { drafts[index].index = index }
        self.init(seed: seed, duration: end, occurrences: drafts)
    }

    private static func draw(_ parameters: FaultParameters, with generator: inout SeededGenerator) -> FaultEffect {
        switch parameters {
        case .disconnect(let mode, let linger): .disconnect(mode: mode, linger: linger)
        case .latency(let add, let jitter, let direction):
            .latency(add: generator.draw(add), jitter: jitter, direction: direction)
        case .bandwidth(let rate, let direction): .bandwidth(rate: rate, direction: direction)
        case .partition(let direction): .partition(direction: direction)
        case .stall(let direction): .stall(direction: direction)
        case .refuse: .refuse
        case .handoff(let from, let to, let blackout, let linger):
            .handoff(from: from, to: to, blackout: generator.draw(blackout), linger: linger)
        case .slice(let maxBytes, let delay, let direction): .slice(maxBytes: maxBytes, delay: delay, direction: direction)
        case .link(let profile): .link(profile)
        }
    }

    /// One line per occurrence: time, kind, how long, parameters, targets, proxy.
    public var lines: [String] {
        occurrences.map { occurrence in
            var line = Self.clock(occurrence.at) + "  " + Self.pad(occurrence.kind.rawValue, 10)
            line += occurrence.lasts == .zero ? "  " + Self.pad("", 14) : "  for " + Self.pad("\(occurrence.lasts)", 10)
            var parameters = occurrence.effect.summary
            if occurrence.kind != .refuse, occurrence.kind != .link {
                parameters += (parameters.isEmpty ? "" : " ") + "targets=\(occurrence.targets)"
            }
            if let proxy = occurrence.proxy { parameters += " proxy=\(proxy)" }
            return (line + "  " + parameters).trimmingWhitespace
        }
    }

    /// `00:01:02.345`: hours, minutes, seconds and milliseconds since the start.
    public static func clock(_ duration: ChaosDuration) -> String {
        let millis = duration.nanoseconds / 1_000_000
        let seconds = millis / 1000, fraction = millis % 1000
        let h = seconds / 3600, m = (seconds / 60) % 60, s = seconds % 60
        let two = { (n: Int64) in n < 10 ? "0\(n)" : "\(n)" }
        let three = fraction < 10 ? "00\(fraction)" : fraction < 100 ? "0\(fraction)" : "\(fraction)"
        return "\(two(h)):\(two(m)):\(two(s)).\(three)"
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
