internal import Yams

extension ScenarioReader {
    static let scheduleKeys = ["at", "every", "for", "after", "until", "probability", "targets", "proxy"]

    static func parameterKeys(_ kind: FaultKind) -> [String] {
        switch kind {
        case .disconnect: ["mode", "linger"]
        case .latency: ["add", "jitter", "direction"]
        case .bandwidth: ["rate", "direction"]
        case .partition: ["direction"]
        case .handoff: ["from", "to", "blackout", "linger", "dead_wifi", "new_address"]
        case .refuse: []
        case .slice: ["size", "delay", "direction"]
        case .stall: ["direction"]
        case .link: ["profile"]
        case .loss: ["rate", "burst", "direction"]
        case .mtu: ["size", "direction"]
        case .radio: ["promotion", "tail", "per"]
        case .nat: ["idle_timeout"]
        case .duplicate, .reorder: ["rate", "direction"]
        case .rebind: []
        case .handshake: ["mode"]
        case .restart: ["down", "signal"]
        case .slowClose, .limitData, .resetPeer, .timeout: []  // not in a scenario
        case .protocolFault: []  // its plug-in declares them (``protocolFaultKeys``)
        }
    }

    func fault(_ value: YAMLValue, proxies: [ProxySpec], duration: ChaosDuration) throws -> FaultRule {
        let kinds = FaultKind.scenarioKinds.map(\.rawValue) + framings.faultKinds
        guard value.isMapping else {
            throw value.error("a fault must be a mapping like '- latency: {at: 10s, add: 100ms}', found \(value.shape)")
        }
        let outer = try value.mapping("a fault", allowed: kinds)
        guard outer.entries.count == 1, let entry = outer.entries.first else {
            throw value.error("a fault names exactly one kind (\(kinds.joined(separator: ", "))), found \(outer.entries.count)")
        }
        let kind = FaultKind(rawValue: entry.key)!
        let what = "\(kind.rawValue) fault"
        let body = entry.value
        let map: YAMLMapping
        if body.isNull {
            map = YAMLMapping(owner: body, what: what, entries: [])
        } else {
            let keys = framings.fault(named: kind.rawValue)?.declaration.keys ?? Self.parameterKeys(kind)
            map = try body.mapping(what, allowed: Self.scheduleKeys + keys)
        }
        if kind.actsOnThePair {
            for key in ["targets", "proxy"] {
                if let value = map[key] { throw value.error("\(what) restarts the pair's server: it takes no '\(key)'") }
            }
        }
        let schedule = try self.schedule(map, kind: kind, what: what, duration: duration)
        let parameters = try self.parameters(map, kind: kind, what: what)
        var proxy: String?
        if let proxyValue = map["proxy"] {
            let name = try proxyValue.string("\(what).proxy")
            guard proxies.contains(where: { $0.name == name }) else {
                throw proxyValue.error(
                    "\(what).proxy names '\(name)', but the proxies are: "
                        + proxies.map(\.name).joined(separator: ", ")
                )
            }
            proxy = name
        }
        if kind == .handshake {
            let reached = proxies.filter { proxy == nil || $0.name == proxy }
            guard reached.contains(where: { $0.tls != nil }) else {
                throw entry.keyValue.error(
                    "a handshake fault acts on TLS handshakes, but "
                        + (proxy.map { "proxy '\($0)' has no tls: block" } ?? "no proxy has a tls: block")
                )
            }
        }
        return FaultRule(
            kind: kind,
            schedule: schedule,
            parameters: parameters,
            proxy: proxy,
            line: entry.keyValue.location.line
        )
    }

    func schedule(_ map: YAMLMapping, kind: FaultKind, what: String, duration: ChaosDuration) throws -> Schedule {
        var at = try map["at"].map { try $0.durationRange("\(what).at") }
        let everyValue = map["every"]
        // Through the control API a fault with neither 'at' nor 'every' begins now, as a toxic does.
        if at == nil, everyValue == nil, let instantAt { at = DurationRange(exactly: instantAt) }
        let every = try everyValue.map { try $0.durationRange("\(what).every") }
        if let every, every.lower < .milliseconds(1), let everyValue {
            throw everyValue.error("\(what).every must be at least 1ms (a faster schedule means nothing to a network)")
        }
        if at != nil, every != nil, let everyValue {
            throw everyValue.error("\(what) has both 'at' and 'every'; use 'at' for once, 'every' to repeat (with 'after' to start later)")
        }
        if let at, at.lower > duration, let v = map["at"] {
            throw v.error("\(what).at \(at) is after the end of the run (duration \(duration))")
        }
        let forValue = map["for"]
        let lasts = try forValue.map { try $0.durationRange("\(what).for") }
        // A plug-in's fault happens at an instant, unless its declaration says it lasts (then it needs 'for').
        let lasting = framings.fault(named: kind.rawValue)?.declaration.lasting == true
        let instant = kind.isInstant && !lasting
        if let forValue, instant {
            throw forValue.error("\(what) happens at an instant and takes no 'for'")
        }
        if lasting, lasts == nil {
            throw map.owner.error("\(what) lasts: it needs 'for' (how long it lies in wait for the connections it catches)")
        }
        if let forValue, kind.lastsItsOwnTime {
            throw forValue.error("\(what) takes no 'for': it lasts its '\(kind == .handoff ? "blackout" : "down")'")
        }
        if every != nil, lasts == nil, !instant, !kind.lastsItsOwnTime, let everyValue {
            throw everyValue.error("a repeating \(what) needs 'for' (how long each occurrence lasts)")
        }
        let after = try map["after"].map { try $0.duration("\(what).after") } ?? .zero
        let until = try map["until"].map { try $0.duration("\(what).until") }
        if let until, until <= after, let v = map["until"] {
            throw v.error("\(what).until (\(until)) must be later than after (\(after))")
        }
        if at == nil, every == nil, instant || kind.lastsItsOwnTime {
            throw map.owner.error("\(what) needs 'at' (once) or 'every' (repeating)")
        }
        let probability = try map["probability"].map { try $0.double("\(what).probability", in: 0...1) } ?? 1
        if probability > 0, probability < Scenario.leastProbability, let v = map["probability"] {
            throw v.error("\(what).probability must be 0 or at least \(Scenario.leastProbability) (a rarer fault never comes)")
        }
        let targets = try map["targets"].map { try self.targets($0, what: what) } ?? .all
        return Schedule(
            at: at,
            every: every,
            lasts: lasts,
            after: after,
            until: until,
            probability: probability,
            targets: targets
        )
    }

    func targets(_ value: YAMLValue, what: String) throws -> Targets {
        let text = try value.string("\(what).targets")
        if text == "all" { return .all }
        if let n = Int(text) {
            guard n >= 1 else { throw value.error("\(what).targets must be at least 1, found \(n)") }
            return .count(n)
        }
        let fraction: Double? = text.hasSuffix("%") ? Double(text.dropLast()).map { $0 / 100 } : Double(text)
        guard let fraction, fraction > 0, fraction <= 1 else {
            throw value.error("\(what).targets must be 'all', a count like 3 or a fraction like 0.5 or 50%, found '\(text)'")
        }
        return .fraction(fraction)
    }

    func parameters(_ map: YAMLMapping, kind: FaultKind, what: String) throws -> FaultParameters {
        func direction(default fallback: DirectionSet) throws -> DirectionSet {
            try map["direction"]?.choice("\(what).direction", of: DirectionSet.self) ?? fallback
        }
        func linger() throws -> ChaosDuration {
            try map["linger"].map { try $0.duration("\(what).linger") } ?? .seconds(Int64(30))
        }
        switch kind {
        case .disconnect:
            let mode = try map["mode"]?.choice("\(what).mode", of: DisconnectMode.self) ?? .reset
            return .disconnect(mode: mode, linger: try linger())
        case .latency:
            let add = try map.required("add").durationRange("\(what).add")
            let jitter = try map["jitter"].map { try $0.duration("\(what).jitter") } ?? .zero
            return .latency(add: add, jitter: jitter, direction: try direction(default: .both))
        case .bandwidth:
            let rateValue = try map.required("rate")
            let text = try rateValue.string("\(what).rate")
            guard let rate = ByteRate(parsing: text) else {
                throw rateValue.error("\(what).rate must be a rate like 1MB/s, 500KB/s or 10mbit, found '\(text)'")
            }
            return .bandwidth(rate: rate, direction: try direction(default: .both))
        case .partition:
            return .partition(direction: try direction(default: .both))
        case .stall:
            return .stall(direction: try direction(default: .downstream))
        case .refuse:
            return .refuse
        case .handoff:
            let from = try map["from"].map { try linkProfile($0, what: "\(what).from") } ?? LinkProfile.named("wifi")!
            let to = try map["to"].map { try linkProfile($0, what: "\(what).to") } ?? LinkProfile.named("lte")!
            let blackout =
                try map["blackout"].map { try $0.durationRange("\(what).blackout") }
                ?? DurationRange(exactly: .milliseconds(500))
            let deadWiFi = try map["dead_wifi"].map { try $0.durationRange("\(what).dead_wifi") }
            let newAddress = try map["new_address"].flatMap { try SourceAddressPool.parse($0, what: "\(what).new_address") }
            return .handoff(from: from, to: to, blackout: blackout, linger: try linger(), deadWiFi: deadWiFi, newAddress: newAddress)
        case .slice:
            var size = 16
            if let sizeValue = map["size"] {
                size = Int(try sizeValue.int("\(what).size (bytes per piece)", in: 1...65536))
            }
            let delay =
                try map["delay"].map { try $0.durationRange("\(what).delay") }
                ?? DurationRange(.microseconds(500), .milliseconds(2))
            return .slice(maxBytes: size, delay: delay, direction: try direction(default: .both))
        case .link:
            return .link(try linkProfile(try map.required("profile"), what: "\(what).profile"))
        case .loss:
            let rateValue = try map.required("rate")
            let rate = try rateValue.double("\(what).rate", in: -.greatestFiniteMagnitude ... .greatestFiniteMagnitude)
            guard (0...FaultParameters.maximumLossRate).contains(rate) else {
                throw rateValue.error(
                    "\(what).rate must be a share of packets from 0% to "
                        + "\(FaultParameters.percent(FaultParameters.maximumLossRate)), found \(try rateValue.string("\(what).rate"))"
                )
            }
            let burst =
                try map["burst"].map { try $0.double("\(what).burst (packets lost in a row, on average)", in: 1...FaultParameters.maximumLossBurst) }
                ?? 1
            return .loss(rate: rate, burst: burst, direction: try direction(default: .both))
        case .rebind:
            return .rebind
        case .duplicate, .reorder:
            let rateValue = try map.required("rate")
            let rate = try rateValue.double("\(what).rate", in: -.greatestFiniteMagnitude ... .greatestFiniteMagnitude)
            guard (0...FaultParameters.maximumLossRate).contains(rate) else {
                throw rateValue.error(
                    "\(what).rate must be a share of datagrams from 0% to "
                        + "\(FaultParameters.percent(FaultParameters.maximumLossRate)), found \(try rateValue.string("\(what).rate"))"
                )
            }
            let directions = try direction(default: .both)
            return kind == .duplicate ? .duplicate(rate: rate, direction: directions) : .reorder(rate: rate, direction: directions)
        case .mtu:
            let size =
                try map["size"].map {
                    try $0.int(
                        "\(what).size (bytes per packet)",
                        in: Int64(FaultParameters.mtuRange.lowerBound)...Int64(FaultParameters.mtuRange.upperBound)
                    )
                } ?? 1280
            return .mtu(size: Int(size), direction: try direction(default: .both))
        case .radio:
            return .radio(try radio(map, what: what, defaults: .lte))
        case .nat:
            return .nat(idleTimeout: try map["idle_timeout"].map { try $0.duration("\(what).idle_timeout") } ?? CarrierNAT.defaultIdleTimeout)
        case .protocolFault(let name):
            guard let declaration = framings.fault(named: name)?.declaration else {
                throw map.owner.error("\(what): no protocol declares a fault '\(name)'")
            }
            return .protocolFault(try protocolFault(map, declaration, what: what))
        case .handshake:
            return .handshake(mode: try map["mode"]?.choice("\(what).mode", of: HandshakeMode.self) ?? .stall)
        case .restart:
            let down = try map["down"].map { try $0.durationRange("\(what).down") } ?? DurationRange(exactly: .seconds(Int64(1)))
            return .restart(down: down, signal: try map["signal"]?.choice("\(what).signal", of: RestartSignal.self) ?? .term)
        case .slowClose, .limitData, .resetPeer, .timeout:
            throw map.owner.error("\(what) is a Toxiproxy toxic: add it through the control API (POST /proxies/NAME/toxics)")
        }
    }

    /// A plug-in's fault: each field its declaration names, read by its rule, or its default.
    func protocolFault(_ map: YAMLMapping, _ declaration: ProtocolFaultDeclaration, what: String) throws -> ProtocolFault {
        var fault = declaration.defaults
        for (index, field) in declaration.fields.enumerated() {
            guard let value = map[field.key] else { continue }
            let name = "\(what).\(field.key)"
            let read: ProtocolFault.Value
            switch field.rule {
            case .integer(let range, _, _, _):
                // A code is often written in hex (`0x8B`).
                let text = try value.string(name)
                if text.lowercased().hasPrefix("0x"), let number = Int64(text.dropFirst(2), radix: 16) {
                    guard range.contains(number) else {
                        throw value.error("\(name) must be between \(range.lowerBound) and \(range.upperBound), found \(text)")
                    }
                    read = .integer(number)
                } else {
                    read = .integer(try value.int(name, in: range))
                }
            case .choice(let choices, _):
                let text = try value.string(name)
                guard choices.contains(text) else {
                    var message = "\(name) must be one of \(choices.joined(separator: ", ")), found '\(text)'"
                    if let near = YAMLValue.nearest(to: text, in: choices) { message += " (did you mean '\(near)'?)" }
                    throw value.error(message)
                }
                read = .text(text)
            case .duration: read = .text("\(try value.duration(name))")
            }
            if let problem = field.problem(read) { throw value.error("\(name) \(problem)") }
            fault.fields[index].value = read
        }
        return fault
    }

    /// A plug-in's faults make the proxies follow that protocol's frames: the faults must agree on one protocol, and
    /// with the protocol the audit reads.
    func checkFrames(_ faults: [FaultRule], at values: [YAMLValue], protocolSpec: ProtocolSpec?) throws {
        var needed: String?
        for (rule, value) in zip(faults, values) {
            guard rule.kind.isProtocolFault, let framing = framings.fault(named: rule.kind.rawValue)?.framing, let frames = framing.frames
            else { continue }
            if let needed, needed != frames {
                throw value.error(
                    "a \(rule.kind.rawValue) fault needs \(frames) frames, but an earlier fault needs "
                        + "\(needed) frames; one scenario can follow one protocol"
                )
            }
            needed = frames
            if let audited = protocolSpec?.framing, let auditedFrames = framings.traits(named: audited.name)?.frames, auditedFrames != frames {
                throw value.error("a \(rule.kind.rawValue) fault needs \(frames) frames, but protocol.framing reads \(audited.name)")
            }
        }
    }

    func linkProfile(_ value: YAMLValue, what: String) throws -> LinkProfile {
        if value.isScalar {
            let name = try value.string(what)
            guard let profile = LinkProfile.named(name) else {
                let names = LinkProfile.builtIn.map(\.name)
                var message =
                    "\(what) must be a link profile (\(names.joined(separator: ", "))) or a mapping "
                    + "{latency, jitter, bandwidth_up, bandwidth_down}, found '\(name)'"
                if let near = YAMLValue.nearest(to: name, in: names) { message += " (did you mean '\(near)'?)" }
                throw value.error(message)
            }
            return profile
        }
        let map = try value.mapping(what, allowed: ["name", "latency", "jitter", "bandwidth_up", "bandwidth_down", "radio", "nat"])
        func rate(_ key: String) throws -> ByteRate? {
            guard let v = map[key] else { return nil }
            let text = try v.string("\(what).\(key)")
            guard let rate = ByteRate(parsing: text) else {
                throw v.error("\(what).\(key) must be a rate like 1MB/s or 10mbit, found '\(text)'")
            }
            return rate
        }
        return LinkProfile(
            name: try map["name"]?.string("\(what).name") ?? "custom",
            latency: try map["latency"].map { try $0.duration("\(what).latency") } ?? .zero,
            jitter: try map["jitter"].map { try $0.duration("\(what).jitter") } ?? .zero,
            bandwidthUp: try rate("bandwidth_up"),
            bandwidthDown: try rate("bandwidth_down"),
            radio: try map["radio"].map {
                try radio(
                    try $0.mapping("\(what).radio", allowed: ["promotion", "tail", "per"]),
                    what: "\(what).radio",
                    defaults: .lte
                )
            },
            natIdleTimeout: try map["nat"].map { value in
                let nat = try value.mapping("\(what).nat", allowed: ["idle_timeout"])
                return try nat["idle_timeout"].map { try $0.duration("\(what).nat.idle_timeout") } ?? CarrierNAT.defaultIdleTimeout
            }
        )
    }

    /// `{promotion, tail, per}`, each defaulting to `defaults`'s.
    func radio(_ map: YAMLMapping, what: String, defaults: RadioModel) throws -> RadioModel {
        let promotion = try map["promotion"].map { try $0.duration("\(what).promotion") } ?? defaults.promotion
        var tail = defaults.tail
        if let value = map["tail"] {
            tail = try value.duration("\(what).tail")
            guard tail.nanoseconds > 0 else { throw value.error("\(what).tail must be above 0 (the radio's idle timer), found \(tail)") }
        }
        let per = try map["per"]?.string("\(what).per") ?? "proxy"
        guard per == "proxy" || per == "connection" else {
            throw map["per"]!.error("\(what).per must be 'proxy' (one radio for the phone behind it) or 'connection', found '\(per)'")
        }
        return RadioModel(promotion: promotion, tail: tail, perConnection: per == "connection")
    }
}

extension FaultRule {
    /// Parses one fault written as in a scenario's `faults:` list, e.g. `{"latency": {"add": "100ms"}}`
    /// (JSON is YAML too), for the control API. `source` names it in messages.
    /// `instantAt`: when a fault gives neither `at` nor `every`, it begins then
    /// (the control API passes its clock's now); nil: a fault for a while then begins at 0, an instant one is refused, as in a scenario.
    package static func parse(
        _ text: String,
        proxies: [ProxySpec],
        duration: ChaosDuration,
        source: String = "request",
        instantAt: ChaosDuration? = nil,
        framings: FramingCatalog
    ) throws -> FaultRule {
        let root: Node
        do {
            guard let node = try Yams.compose(yaml: text) else {
                throw ChaosError.badInput(
                    "empty fault; expected e.g. {\"latency\": {\"add\": \"100ms\"}}",
                    at: .init(file: source, line: 1, column: 1)
                )
            }
            root = node
        } catch let error as ChaosError {
            throw error
        } catch {
            throw ChaosError.badInput("not valid JSON or YAML: \(error)", at: .init(file: source, line: 1, column: 1))
        }
        return try ScenarioReader(file: source, instantAt: instantAt, framings: framings).fault(
            YAMLValue(node: root, file: source),
            proxies: proxies,
            duration: duration
        )
    }
}
