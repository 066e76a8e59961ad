/// How a rule's parameters and an occurrence's effect are saved: a core fault as its case (`{"latency": {…}}`), a
/// plug-in's fault under its own kind's camel-case name (`{"wsClose": {…}}`), so that `scenario.json` and
/// `timeline.json` read the same whichever module knows the fault.
@propertyWrapper
package struct FaultCoding<Span: FaultSpan>: Sendable, Equatable, Codable {
    package var wrappedValue: FaultSpec<Span>

    /// Wraps `wrappedValue`.
    package init(wrappedValue: FaultSpec<Span>) { self.wrappedValue = wrappedValue }

    /// The keys the core faults are saved under.
    static var coreKeys: Set<String> {
        [
            "disconnect", "latency", "bandwidth", "partition", "stall", "refuse", "handoff", "slice", "link", "loss", "mtu",
            "radio", "nat", "handshake", "restart", "slowClose", "limitData", "resetPeer", "timeout",
        ]
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyCodingKey.self)
        if container.allKeys.count == 1, let key = container.allKeys.first, !Self.coreKeys.contains(key.stringValue) {
            let catalog = decoder.userInfo[FramingCatalog.userInfoKey] as? FramingCatalog
            wrappedValue = .protocolFault(try ProtocolFault(from: container, key: key, catalog: catalog))
        } else {
            wrappedValue = try FaultSpec<Span>(from: decoder)
        }
    }

    package func encode(to encoder: any Encoder) throws {
        if case .protocolFault(let fault) = wrappedValue {
            try fault.encode(to: encoder)
        } else {
            try wrappedValue.encode(to: encoder)
        }
    }
}
