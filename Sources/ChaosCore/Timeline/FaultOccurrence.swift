/// One fault, at one time, with its parameters drawn: a line of the timeline.
package struct FaultOccurrence: Sendable, Codable, Equatable {
    /// Position in the timeline (0-based, in time order).
    package var index: Int
    /// The rule (0-based, file order) it came from.
    package var rule: Int
    /// When it starts, from the start of the run.
    package var at: ChaosDuration
    /// How long it lasts (0 for instant faults; a handoff lasts its blackout).
    package var lasts: ChaosDuration
    /// Only this proxy; nil: every proxy.
    package var proxy: String?
    /// Which live connections it hits.
    package var targets: Targets
    /// The seed for what is drawn when it is applied (which connections, jitter, slice sizes).
    package var seed: UInt64
    /// What it does, with its parameters drawn.
    @FaultCoding package var effect: FaultEffect

    /// Creates an occurrence (timelines draw them; tests and replay build them).
    package init(
        index: Int,
        rule: Int,
        at: ChaosDuration,
        lasts: ChaosDuration,
        proxy: String?,
        targets: Targets,
        seed: UInt64,
        effect: FaultEffect
    ) {
        self.index = index
        self.rule = rule
        self.at = at
        self.lasts = lasts
        self.proxy = proxy
        self.targets = targets
        self.seed = seed
        self.effect = effect
    }

    /// The fault kind.
    package var kind: FaultKind { effect.kind }
    /// When it ends.
    package var end: ChaosDuration { at + lasts }

    /// The mark that names this occurrence in the traffic event stream.
    package var mark: FaultMark { FaultMark(kind: kind.rawValue, occurrence: index, detail: effect.summary, proxy: proxy) }

    /// The mark of this occurrence when it belongs to control-API fault `id` (not the run's timeline): numbered
    /// apart from the run's own (``FaultMark/apiOccurrence(id:index:)``), its detail naming the fault.
    package func mark(apiFault id: Int) -> FaultMark {
        FaultMark(
            kind: kind.rawValue,
            occurrence: FaultMark.apiOccurrence(id: id, index: index),
            detail: "api fault \(id): " + effect.summary,
            proxy: proxy
        )
    }
}
