import Foundation
internal import Yams

extension Scenario {
    /// Reads and validates the scenario at `path`; `framings` are those `protocol:` may name (the protocol
    /// plug-ins' registry). Every problem is a ``ChaosError`` with code `badInput` naming `path:line:column`
    /// and what was expected.
    package static func load(path: String, framings: FramingCatalog) throws -> Scenario {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ChaosError.badInput("cannot read scenario file '\(path)': no such file or not readable")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ChaosError.badInput("scenario file '\(path)' is not UTF-8 text")
        }
        return try parse(yaml: text, file: path, framings: framings)
    }

    /// Parses and validates scenario text; `file` names it in messages, `framings` are those `protocol:` may name.
    package static func parse(yaml text: String, file: String, framings: FramingCatalog) throws -> Scenario {
        let root: Node
        do {
            guard let node = try Yams.compose(yaml: text) else {
                throw ChaosError.badInput(
                    "scenario is empty; expected a mapping with name, duration, proxies and faults",
                    at: .init(file: file, line: 1, column: 1)
                )
            }
            root = node
        } catch let error as ChaosError {
            throw error
        } catch let error as YamlError {
            throw yamlSyntaxError(error, file: file)
        } catch {
            throw ChaosError.badInput("not valid YAML: \(error)", at: .init(file: file, line: 1, column: 1))
        }
        let scenario = try ScenarioReader(file: file, framings: framings).scenario(YAMLValue(node: root, file: file))
        // The reader checked each value where it stands; this is the one rule set every entry shares.
        try scenario.checkInvariants(source: file, framings: framings)
        return scenario
    }

    private static func yamlSyntaxError(_ error: YamlError, file: String) -> ChaosError {
        func at(_ mark: Mark) -> ChaosError.Location { .init(file: file, line: mark.line, column: mark.column) }
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let prefix = context.map { "\($0.text): " } ?? ""
            return .badInput("not valid YAML: \(prefix)\(problem)", at: at(mark))
        case .duplicatedKeysInMapping(let duplicates, let context):
            return .badInput("duplicate key '\(duplicates.joined(separator: "', '"))'", at: at(context.mark))
        case .reader(let problem, let offset, _, _):
            return .badInput(
                "not readable as YAML text: \(problem) at byte \(offset ?? 0)",
                at: .init(file: file, line: 1, column: 1)
            )
        default:
            return .badInput("not valid YAML: \(error)", at: .init(file: file, line: 1, column: 1))
        }
    }
}

/// Turns the YAML tree into a ``Scenario``, checking every key and value.
struct ScenarioReader {
    let file: String
    /// When an instant fault with neither `at` nor `every` happens (the control API's: now); nil: it is refused.
    var instantAt: ChaosDuration?
    /// The framings `protocol:` may name (a fault alone names none).
    let framings: FramingCatalog

    init(file: String, instantAt: ChaosDuration? = nil, framings: FramingCatalog = FramingCatalog([])) {
        self.file = file
        self.instantAt = instantAt
        self.framings = framings
    }

    func scenario(_ root: YAMLValue) throws -> Scenario {
        let top = try root.mapping(
            "the scenario",
            allowed: [
                "name", "duration", "seed", "proxies", "pair", "protocol", "baseline", "faults", "expect", "capture", "fleet",
            ]
        )
        let name = try top.required("name").string("name")
        guard Scenario.isValidName(name) else {
            throw try top.required("name").error("name must be letters, digits, '-', '_' or '.', found '\(name)'")
        }
        let durationValue = try top.required("duration")
        let duration = try durationValue.duration("duration")
        guard duration.nanoseconds > 0 else { throw durationValue.error("duration must be longer than 0s") }
        let seed = try top["seed"].map { try $0.unsigned("seed") }
        let proxies = try self.proxies(try top.required("proxies"))
        let pair = try top["pair"].map(self.pair)
        let protocolSpec = try top["protocol"].map(self.protocolSpec)
        let baseline = try top["baseline"].map { try linkProfile($0, what: "baseline") }
        let faultValues = try top["faults"]?.sequence("faults") ?? []
        let faults = try faultValues.map { try fault($0, proxies: proxies, duration: duration) }
        for (rule, value) in zip(faults, faultValues) where rule.kind.actsOnThePair && pair?.server == nil {
            throw value.error("a \(rule.kind.rawValue) fault restarts the pair's server, but the scenario has no pair.server")
        }
        try checkFrames(faults, at: faultValues, protocolSpec: protocolSpec)
        for (rule, value) in zip(faults, faultValues) {
            if let problem = Scenario.transportProblem(of: rule, proxies: proxies) { throw value.error(problem) }
        }
        if let protocolSpec, framings.traits(named: protocolSpec.framing.name)?.readsDatagrams == true,
            let tcp = proxies.first(where: { $0.transport == .tcp })
        {
            throw try top.required("protocol").error(
                "framing \(protocolSpec.framing.name) reads UDP datagrams, but proxy '\(tcp.name)' relays TCP (listen: udp://…)"
            )
        }
        if protocolSpec?.transport == .quic, let tcp = proxies.first(where: { $0.transport == .tcp }) {
            throw try top.required("protocol").error(
                "protocol.transport quic reads QUIC over UDP, but proxy '\(tcp.name)' relays TCP (listen: udp://…)"
            )
        }
        let expectations = try top["expect"].map(self.expectations) ?? []
        let capture = try top["capture"].map(self.capture)
        var scenario = Scenario(
            name: name,
            duration: duration,
            seed: seed,
            proxies: proxies,
            pair: pair,
            protocolSpec: protocolSpec,
            baseline: baseline,
            faults: faults,
            expectations: expectations,
            capture: capture,
            file: file
        )
        scenario.fleet = try top["fleet"].map(self.fleet)
        return scenario
    }

    func fleet(_ value: YAMLValue) throws -> FleetSpec {
        let map = try value.mapping("fleet", allowed: ["schedule"])
        guard let scheduleValue = map["schedule"] else { return FleetSpec() }
        let text = try scheduleValue.string("fleet.schedule")
        guard let schedule = FleetSpec.Schedule(rawValue: text) else {
            throw scheduleValue.error("fleet.schedule must be shared or per-agent, found '\(text)'")
        }
        return FleetSpec(schedule: schedule)
    }

    // MARK: proxies

    func proxies(_ value: YAMLValue) throws -> [ProxySpec] {
        let items = try value.sequence("proxies")
        guard !items.isEmpty else { throw value.error("proxies needs at least one proxy") }
        var result: [ProxySpec] = []
        // A UDP and a TCP proxy may listen on the same port: they are different sockets.
        var listens: [String: YAMLValue] = [:]
        for item in items {
            let map = try item.mapping("a proxy", allowed: ["name", "listen", "upstream", "tls"])
            let nameValue = try map.required("name")
            let name = try nameValue.string("proxy name")
            if result.contains(where: { $0.name == name }) { throw nameValue.error("duplicate proxy name '\(name)'") }
            let listenValue = try map.required("listen")
            let (transport, listen) = try address(listenValue, what: "listen")
            if listen.port != 0, listens[transport.prefix + listen.description] != nil {
                throw listenValue.error("listen address \(transport.prefix)\(listen) is already used by another proxy")
            }
            listens[transport.prefix + listen.description] = listenValue
            let upstreamValue = try map.required("upstream")
            let (upstreamTransport, upstream) = try address(upstreamValue, what: "upstream")
            guard upstreamTransport == transport else {
                throw upstreamValue.error(
                    "upstream is \(upstreamTransport.rawValue) but listen is \(transport.rawValue): a proxy relays one transport (write udp:// on both, or on neither)"
                )
            }
            guard upstream.port != 0 else { throw upstreamValue.error("upstream needs a real port, not 0") }
            if upstream == listen { throw upstreamValue.error("upstream \(upstream) is the proxy's own listen address") }
            if transport == .udp, let tlsValue = map["tls"] {
                throw tlsValue.error("a udp:// proxy carries no TLS (QUIC's keys come from protocol.keylog)")
            }
            let tls = try map["tls"].map { try self.tls($0, "proxies[\(result.count)].tls") }
            result.append(ProxySpec(name: name, listen: listen, upstream: upstream, tls: tls, transport: transport))
        }
        return result
    }

    /// A proxy's `listen` or `upstream`: `host:port`, `tcp://host:port` or `udp://host:port`.
    func address(_ value: YAMLValue, what: String) throws -> (Transport, HostPort) {
        let text = try value.string(what)
        guard let split = Transport.split(text) else {
            throw value.error("\(what) has an unknown scheme in '\(text)' (udp:// or tcp://, or none for TCP)")
        }
        guard let address = HostPort(parsing: split.address) else {
            throw value.error(
                "\(what) must be an address like 127.0.0.1:7000 or udp://127.0.0.1:9000 (port 0-65535), found '\(text)'"
            )
        }
        return (split.transport, address)
    }

    // MARK: pair, protocol, capture, expect

    func pair(_ value: YAMLValue) throws -> PairSpec {
        let map = try value.mapping("pair", allowed: ["server", "client"])
        let pair = PairSpec(
            server: try map["server"].map { try process($0, what: "pair.server") },
            client: try map["client"].map { try process($0, what: "pair.client") }
        )
        if pair.server == nil, pair.client == nil { throw value.error("pair needs a server, a client or both") }
        return pair
    }

    func process(_ value: YAMLValue, what: String) throws -> ProcessSpec {
        let map = try value.mapping(what, allowed: ["run", "ready", "count", "stop_grace"])
        let runValue = try map.required("run")
        let run = try runValue.string("\(what).run")
        guard !run.trimmingWhitespace.isEmpty else { throw runValue.error("\(what).run is empty; expected a command") }
        for placeholder in Self.placeholders(in: run) where !ProcessSpec.placeholders.contains(placeholder) {
            throw runValue.error(
                "unknown placeholder {\(placeholder)} in \(what).run; expected {index}, {listen.port}, "
                    + "{upstream.port}, {listen.host}, {upstream.host}, {run_dir}, {scenario_dir} or {seed}"
            )
        }
        var ready: String?
        if let readyValue = map["ready"] {
            let text = try readyValue.string("\(what).ready")
            guard ProcessSpec.isReadyCheck(text, client: what == "pair.client") else {
                throw readyValue.error("\(what).ready must be \(ProcessSpec.readyChecks(client: what == "pair.client")), found '\(text)'")
            }
            ready = text
        }
        let count = try map["count"].map { Int(try $0.int("\(what).count", in: 1...10_000)) } ?? 1
        let grace = try map["stop_grace"].map { try $0.duration("\(what).stop_grace") } ?? .seconds(Int64(5))
        return ProcessSpec(run: run, ready: ready, count: count, stopGrace: grace)
    }

    static func placeholders(in text: String) -> [String] {
        var result: [String] = []
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            result.append(String(rest[rest.index(after: open)..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return result
    }

    func capture(_ value: YAMLValue) throws -> CaptureSpec {
        if value.isScalar { return CaptureSpec(enabled: try value.bool("capture"), ringBytes: nil) }
        let map = try value.mapping("capture", allowed: ["enabled", "ring"])
        let enabled = try map["enabled"]?.bool("capture.enabled") ?? true
        var ring: Int64?
        if let ringValue = map["ring"] {
            let text = try ringValue.string("capture.ring")
            guard let bytes = ByteSize.parse(text), bytes >= 1_048_576 else {
                throw ringValue.error("capture.ring must be a size of at least 1MB like 256MB, found '\(text)'")
            }
            ring = bytes
        }
        return CaptureSpec(enabled: enabled, ringBytes: ring)
    }

    func expectations(_ value: YAMLValue) throws -> [Expectation] {
        let map = try value.mapping("expect", allowed: Expectation.known.map(\.name))
        return try map.entries.map { entry in
            let unit = Expectation.known.first { $0.name == entry.key }!.unit
            var text = try entry.value.string("expect.\(entry.key)").trimmingWhitespace
            if entry.key == "faults_fired", text == "all" { text = ">= 100%" }
            var comparison = Expectation.floors.contains(entry.key) ? Expectation.Comparison.atLeast : .atMost
            var rest = Substring(text)
            for op in ["<=", ">=", "==", "<", ">"] where rest.hasPrefix(op) {
                comparison = Expectation.Comparison(rawValue: op)!
                rest = rest.dropFirst(op.count)
                break
            }
            if text == rest, unit == .ratio { comparison = .atLeast }
            let number = String(rest).trimmingWhitespace
            let bound: Double?
            switch unit {
            case .count: bound = Double(number).flatMap { $0 >= 0 && $0 == $0.rounded() ? $0 : nil }
            case .ratio:
                if number.hasSuffix("%") {
                    bound = Double(number.dropLast()).flatMap { (0...100).contains($0) ? $0 / 100 : nil }
                } else {
                    bound = Double(number).flatMap { (0...1).contains($0) ? $0 : nil }
                }
            case .seconds: bound = ChaosDuration(parsing: number)?.seconds
            }
            guard let bound else {
                let example =
                    switch unit {
                    case .count: "0 or '<= 3'"
                    case .ratio: entry.key == "faults_fired" ? "all or '>= 90%'" : "'>= 99.9%'"
                    case .seconds: "'< 10s'"
                    }
                throw entry.value.error("expect.\(entry.key) must be like \(example), found '\(text)'")
            }
            return Expectation(name: entry.key, comparison: comparison, bound: bound, written: text)
        }
    }
}
