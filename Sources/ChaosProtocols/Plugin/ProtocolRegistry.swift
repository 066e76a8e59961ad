package import ChaosCore

/// Every protocol chaos understands: adding one is a folder and a line here.
package enum ProtocolRegistry {
    /// The plug-ins, in the order their names are listed in messages.
    package static let plugins: [any ProtocolPlugin.Type] = [
        LinesProtocol.self,
        LengthPrefixedProtocol.self,
        WebSocketProtocol.self,
        GRPCProtocol.self,
        SSEProtocol.self,
        MQTTProtocol.self,
        SocketIOProtocol.self,
        DatagramProtocol.self,
        HTTP3Protocol.self,
        AutoProtocol.self,
    ]

    /// The plug-in that `name` (a `protocol.framing` value) names.
    package static func plugin(named name: String) -> (any ProtocolPlugin.Type)? {
        plugins.first { $0.names.contains(name) }
    }

    /// The plug-in that reads `framing`; throws `ChaosError.badInput` when none does.
    package static func plugin(reading framing: ProtocolSpec.Framing) throws -> any ProtocolPlugin.Type {
        guard let plugin = plugin(named: framing.name) else {
            throw ChaosError.badInput("protocol.framing must be one of \(names.joined(separator: ", ")), found '\(framing.name)'")
        }
        return plugin
    }

    /// The framings a scenario may name, for ChaosCore's reader and invariants.
    package static let catalog = FramingCatalog(plugins)

    /// The plug-in whose frames are named `frames` (`websocket`: what `chaos proxy --frames` names).
    package static func plugin(following frames: String) -> (any ProtocolPlugin.Type)? {
        plugins.first { $0.frames == frames }
    }

    /// The plug-in whose frames a scenario's faults need the proxies to follow (its `ws-close` faults: WebSocket's).
    package static func plugin(followedBy scenario: Scenario) -> (any ProtocolPlugin.Type)? {
        scenario.framesFollowed(framings: catalog).flatMap { plugin(following: $0) }
    }

    /// The frame names the proxy can follow (`websocket, http2`).
    package static var frameNames: [String] { plugins.compactMap { $0.frames } }

    /// Every plug-in's counters, then the audit's own (`shared`), each name once, in registry order.
    package static func counters(shared: [ProtocolCounter]) -> [ProtocolCounter] { unique(plugins.flatMap { $0.counters } + shared) }

    /// Every plug-in's counter families, each name once, in registry order.
    package static var counterFamilies: [ProtocolCounter] { unique(plugins.flatMap { $0.counterFamilies }) }

    private static func unique(_ counters: [ProtocolCounter]) -> [ProtocolCounter] {
        var seen: Set<String> = []
        return counters.filter { seen.insert($0.name).inserted }
    }

    /// The framing names, for messages (`lines, length-prefixed, websocket, grpc`).
    package static var names: [String] { plugins.map { $0.name } }
}
