/// Which Socket.IO EVENTs are messages: those of the event names in `events:` and in the namespaces in
/// `namespaces:` (each nil: every one). An event's name is compared as written between its quotes (a name with an
/// escape in it is written with the escape).
struct SocketIOEventFilter: Sendable {
    /// The audited event names as bytes; nil: every name.
    let events: Set<[UInt8]>?
    /// The audited namespaces (`/` the main one); nil: every namespace.
    let namespaces: Set<String>?

    init(events: [String]? = nil, namespaces: [String]? = nil) {
        self.events = events.map { Set($0.map { Array($0.utf8) }) }
        self.namespaces = namespaces.map(Set.init)
    }

    /// Whether every event is audited (nothing to look at).
    var auditsEverything: Bool { events == nil && namespaces == nil }

    /// Whether the EVENT in `namespace` whose JSON array is `payload` is audited.
    func audits(namespace: String, payload: UnsafeBufferPointer<UInt8>) -> Bool {
        if let namespaces, !namespaces.contains(namespace) { return false }
        guard let events else { return true }
        guard let name = JSONArrayIndexer.name(ofEvent: payload) else { return false }
        return events.contains(Array(UnsafeBufferPointer(rebasing: payload[name])))
    }
}
