/// Every fault of a run, when, where and with what parameters: a pure function of
/// (scenario, seed, duration). `chaos validate` prints it, the report records it and
/// `chaos replay` applies it again.
///
/// A timeline is a lazy sequence: occurrences are drawn as they are iterated, so a ten-year run with a
/// fault every millisecond costs no more memory than a ten-second one. Iterating twice gives the same
/// occurrences: each rule draws from its own generator forked from the seed, and the rules are merged in
/// time order.
package struct Timeline: Sendable, Equatable, Sequence {
    /// The seed it was drawn with.
    package let seed: UInt64
    /// The run length it covers.
    package let duration: ChaosDuration
    /// Where the occurrences come from.
    let source: Source
    /// When the schedule was paused (a live run's pause and resume; a replay's, from timeline.json): occurrences
    /// begin later by the pauses before them (``SchedulePauses/begin(ofPlanned:)``). Their `at` stays the planned one.
    package var pauses = SchedulePauses.none

    enum Source: Sendable, Equatable {
        /// Drawn from these rules as iterated.
        case drawn([FaultRule])
        /// Already drawn (a replayed run folder, a test); `complete` is false when a run folder saved only the
        /// first ones (the rest are drawn again from its scenario).
        case recorded([FaultOccurrence], complete: Bool)
    }

    /// Creates a timeline from already drawn occurrences (for replay and tests).
    package init(seed: UInt64, duration: ChaosDuration, occurrences: [FaultOccurrence]) {
        self.init(seed: seed, duration: duration, source: .recorded(occurrences, complete: true))
    }

    /// The timeline of `scenario` with `seed`, over `duration` (the scenario's own by default). Nothing is
    /// drawn until it is iterated.
    package init(scenario: Scenario, seed: UInt64, duration: ChaosDuration? = nil) {
        self.init(rules: scenario.faults, seed: seed, duration: duration ?? scenario.duration)
    }

    /// The timeline of fault `rules` (checked: ``FaultRule/checkInvariants(source:proxies:)``) with `seed`
    /// over `duration`: what a scenario draws, and what a fault added through the control API draws.
    package init(rules: [FaultRule], seed: UInt64, duration: ChaosDuration) {
        self.init(seed: seed, duration: duration, source: .drawn(rules))
    }

    init(seed: UInt64, duration: ChaosDuration, source: Source) {
        self.seed = seed
        self.duration = duration
        self.source = source
    }

    /// False for a run folder's timeline that saved only its first occurrences: ``RunFolder`` draws the
    /// rest again from the scenario beside it.
    package var isComplete: Bool {
        if case .recorded(_, let complete) = source { return complete }
        return true
    }

    /// Draws the occurrences in time order (ties: file order of their rules).
    package func makeIterator() -> Iterator {
        switch source {
        case .drawn(let rules):
            let root = SeededGenerator(seed: seed)
            let draws = rules.enumerated().map { RuleDraw(rule: $1, index: $0, root: root, end: duration) }
            return Iterator(draws: draws, recorded: nil)
        case .recorded(let occurrences, _):
            return Iterator(draws: [], recorded: occurrences.makeIterator())
        }
    }

    /// The occurrences that begin at or before `time`, pauses counted (``begin(of:)``), in order (a report lists
    /// those a run reached).
    package func occurrences(through time: ChaosDuration) -> [FaultOccurrence] {
        Array(lazy.prefix { begin(of: $0) <= time })
    }

    /// When `occurrence` begins on the timeline's clock: its `at`, later by the pauses before it.
    package func begin(of occurrence: FaultOccurrence) -> ChaosDuration {
        pauses.isEmpty ? occurrence.at : pauses.begin(ofPlanned: occurrence.at)
    }

    /// Draws occurrences one by one; memory is one pending occurrence per rule.
    package struct Iterator: IteratorProtocol {
        var draws: [RuleDraw]
        var recorded: IndexingIterator<[FaultOccurrence]>?
        /// The next occurrence of each rule, drawn ahead (nil: that rule has no more).
        var heads: [FaultOccurrence?] = []
        /// The rules that have one, by its time (nil: not drawn yet).
        var order: RuleHeap?
        var count = 0

        init(draws: [RuleDraw], recorded: IndexingIterator<[FaultOccurrence]>?) {
            self.draws = draws
            self.recorded = recorded
        }

        package mutating func next() -> FaultOccurrence? {
            if recorded != nil { return recorded?.next() }  // a recorded timeline keeps its own indexes
            if order == nil {
                heads = draws.indices.map { draws[$0].next() }
                order = RuleHeap(heads.indices.compactMap { rule in heads[rule].map { RuleHeap.Entry(at: $0.at, rule: rule) } })
            }
            guard let best = order!.first?.rule, var occurrence = heads[best] else { return nil }
            heads[best] = draws[best].next()
            if let following = heads[best] { order!.replaceFirst(at: following.at) } else { order!.removeFirst() }
            occurrence.index = count
            count += 1
            return occurrence
        }
    }
}

extension Timeline: Codable {
    /// How many occurrences a run folder's timeline.json holds: enough to read and to check a replay against,
    /// bounded whatever the run's length and rate (the rest are drawn again from scenario.json).
    package static let savedOccurrences = 10_000

    private enum CodingKeys: String, CodingKey { case seed, duration, occurrences, complete, pauses }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(seed, forKey: .seed)
        try container.encode(duration, forKey: .duration)
        var saved = Array(prefix(Self.savedOccurrences + 1))
        let complete = saved.count <= Self.savedOccurrences && isComplete
        if !complete { saved.removeLast(Swift.max(0, saved.count - Self.savedOccurrences)) }
        try container.encode(saved, forKey: .occurrences)
        if !complete { try container.encode(false, forKey: .complete) }
        if !pauses.isEmpty { try container.encode(pauses, forKey: .pauses) }
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let occurrences = try container.decode([FaultOccurrence].self, forKey: .occurrences)
        let complete = try container.decodeIfPresent(Bool.self, forKey: .complete) ?? true
        self.init(
            seed: try container.decode(UInt64.self, forKey: .seed),
            duration: try container.decode(ChaosDuration.self, forKey: .duration),
            source: .recorded(occurrences, complete: complete)
        )
        pauses = try container.decodeIfPresent(SchedulePauses.self, forKey: .pauses) ?? .none
    }
}

extension Timeline {
    /// The whole timeline for one that a run folder saved only the first occurrences of: drawn again from
    /// the scenario and the seed, after checking that it begins with what was saved. A complete timeline is
    /// returned as it is.
    package func completed(from scenario: Scenario, source: String) throws -> Timeline {
        guard !isComplete else { return self }
        var drawn = Timeline(scenario: scenario, seed: seed, duration: duration)
        drawn.pauses = pauses
        for (index, (saved, again)) in zip(self, drawn).enumerated() where saved != again {
            throw ChaosError.badInput(
                "\(source): occurrences[\(index)] is not what scenario.json draws with seed "
                    + "\(seed); the folder was changed or was written by another version of chaos"
            )
        }
        return drawn
    }
}
