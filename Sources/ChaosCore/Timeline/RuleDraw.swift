/// The occurrences of one fault rule, drawn one at a time from the rule's own generator (forked from the
/// run's seed by rule index), so that the draws of one rule never depend on another's.
///
/// The order of draws per occurrence is fixed (it is what a seed means): whether it happens, its parameters,
/// how long it lasts, its own seed, then the gap to the next start.
struct RuleDraw {
    private let rule: FaultRule
    private let ruleIndex: Int
    /// The end of the run.
    private let end: ChaosDuration
    /// The end of this rule's window.
    private let stop: ChaosDuration
    private var generator: SeededGenerator
    private var state: State

    private enum State {
        /// Nothing drawn yet.
        case fresh
        /// A repeating rule: the next start.
        case repeating(ChaosDuration)
        case done
    }

    init(rule: FaultRule, index: Int, root: SeededGenerator, end: ChaosDuration) {
        self.rule = rule
        ruleIndex = index
        self.end = end
        stop = min(rule.schedule.until ?? end, end)
        generator = root.fork("rule", UInt64(index))
        // A rule that never happens has nothing to draw (and must not spin through a long window doing it).
        state = rule.schedule.probability > 0 ? .fresh : .done
    }

    /// The rule's next occurrence (index 0: the timeline numbers them), or nil when it has no more.
    mutating func next() -> FaultOccurrence? {
        let schedule = rule.schedule
        while true {
            switch state {
            case .done:
                return nil
            case .fresh:
                if let at = schedule.at {
                    state = .done
                    return draw(at: generator.draw(at))
                } else if let every = schedule.every {
                    state = .repeating(schedule.after + generator.draw(every))
                } else {
                    state = .done
                    return draw(at: schedule.after)
                }
            case .repeating(let start):
                guard start < stop, let every = schedule.every else {
                    state = .done
                    return nil
                }
                let occurrence = draw(at: start)
                state = .repeating(start + generator.draw(every))
                if let occurrence { return occurrence }
            }
        }
    }

    /// Draws everything for one occurrence before deciding whether it happens, so that probability never
    /// shifts the later draws.
    private mutating func draw(at start: ChaosDuration) -> FaultOccurrence? {
        let schedule = rule.schedule
        let happens = generator.nextUnit() < schedule.probability
        let effect = rule.parameters.drawn(with: &generator)
        var lasts: ChaosDuration =
            switch effect {
            case .disconnect, .rebind: .zero
            // A plug-in's fault is instant, but for one that lasts (its declaration says so, and its rule has `for:`).
            case .protocolFault: schedule.lasts.map { generator.draw($0) } ?? .zero
            case .handoff(_, _, let blackout, _, let deadWiFi, _): blackout + (deadWiFi ?? .zero)
            case .restart(let down, _): down
            default: schedule.lasts.map { generator.draw($0) } ?? (stop - start)
            }
        let seed = generator.next()
        guard happens, start >= schedule.after, start < stop else { return nil }
        switch effect {
        case .handoff, .restart: break  // they last what they last: a server is started again even past the end
        default: lasts = min(lasts, end - start)
        }
        return FaultOccurrence(
            index: 0,
            rule: ruleIndex,
            at: start,
            lasts: lasts,
            proxy: rule.proxy,
            targets: schedule.targets,
            seed: seed,
            effect: effect
        )
    }
}
