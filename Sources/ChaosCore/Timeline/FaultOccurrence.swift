/// One fault, at one time, with its parameters drawn: a line of the timeline.
public struct FaultOccurrence: Sendable, Codable, Equatable {
    /// Position in the timeline (0-based, in time order).
    public var index: Int
    /// The rule (0-based, file order) it came from.
    public var rule: Int
    /// When it starts, from the start of the run.
    public var at: ChaosDuration
    /// How long it lasts (0 for instant faults; a handoff lasts its blackout).
    public var lasts: ChaosDuration
    /// Only this proxy; nil: every proxy.
    public var proxy: String?
    /// Which live connections it hits.
    public var targets: Targets
    /// The seed for what is drawn when it is applied (which connections, jitter, slice sizes).
    public var seed: UInt64
    /// What it does, with its parameters drawn.
    public var effect: FaultEffect

    /// Creates an occurrence (timelines draw them; tests and replay build them).
    public init(
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
    public var kind: FaultKind { effect.kind }
    /// When it ends.
    public var end: ChaosDuration { at + lasts }

    /// The mark that names this occurrence in the traffic event stream.
    public var mark: FaultMark { FaultMark(kind: kind.rawValue, occurrence: index, detail: effect.summary) }

    /// The mark of this occurrence when it belongs to control-API fault `id` (not the run's timeline): numbered
    /// apart from the run's own (``FaultMark/apiOccurrence(id:index:)``), its detail naming the fault.
    public func mark(apiFault id: Int) -> FaultMark {
        FaultMark(
            kind: kind.rawValue,
            occurrence: FaultMark.apiOccurrence(id: id, index: index),
            detail: "api fault \(id): " + effect.summary
        )
    }
}
