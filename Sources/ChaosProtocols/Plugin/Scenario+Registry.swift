package import ChaosCore

/// The scenario entry points with the framings of ``ProtocolRegistry``: what every command, the runner, the control
/// API and the fuzz targets call (ChaosCore itself knows no framing by name).
extension Scenario {
    /// Reads and validates the scenario at `path` (``Scenario/load(path:framings:)`` with the registry's framings).
    package static func load(path: String) throws -> Scenario { try load(path: path, framings: ProtocolRegistry.catalog) }

    /// Parses and validates scenario text (``Scenario/parse(yaml:file:framings:)`` with the registry's framings).
    package static func parse(yaml text: String, file: String) throws -> Scenario {
        try parse(yaml: text, file: file, framings: ProtocolRegistry.catalog)
    }

    /// Checks every rule (``Scenario/checkInvariants(source:framings:)`` with the registry's framings).
    package func checkInvariants(source: String) throws { try checkInvariants(source: source, framings: ProtocolRegistry.catalog) }
}

extension ProtocolSpec {
    /// Checks the rules a protocol obeys (``ProtocolSpec/checkInvariants(framings:_:)`` with the registry's framings).
    package func checkInvariants(_ bad: (String) -> ChaosError) throws {
        try checkInvariants(framings: ProtocolRegistry.catalog, bad)
    }
}
