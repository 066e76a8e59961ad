import Foundation

/// The rules every scenario and timeline obey, however they arrived: parsed from YAML (which checks them
/// with file:line:column as it reads), changed by `--set`, built by the control API, or decoded from a run
/// folder's `scenario.json` / `timeline.json` for `chaos replay`, which a person or a crash may have damaged.
/// A broken rule is a `badInput` error naming the file and the field; nothing downstream meets an absurd value.
extension Scenario {
    /// The longest run (or fault time) a scenario may name.
    package static let longestDuration = ChaosDuration.seconds(Int64(10 * 366 * 86_400))
    /// The most clients a pair may start.
    package static let mostClients = 10_000

    /// Checks every rule; `source` names where the scenario came from, `framings` are those `protocol:` may name.
    package func checkInvariants(source: String, framings: FramingCatalog) throws {
        func bad(_ what: String) -> ChaosError { .badInput("\(source): \(what)") }
        guard Scenario.isValidName(name) else { throw bad("name must be letters, digits, '-', '_' or '.', found '\(name)'") }
        try Self.check(duration, "duration", positive: true, bad)
        guard !proxies.isEmpty else { throw bad("proxies: at least one proxy is needed") }
        var names = Set<String>()
        var listens = Set<String>()
        for (index, proxy) in proxies.enumerated() {
            guard names.insert(proxy.name).inserted else { throw bad("proxies[\(index)]: the name '\(proxy.name)' is used twice") }
            for (field, address) in [("listen", proxy.listen), ("upstream", proxy.upstream)] where !address.isValid {
                throw bad("proxies[\(index)].\(field): '\(address)' is not a host:port (port 0-65535)")
            }
            guard proxy.upstream.port != 0 else { throw bad("proxies[\(index)].upstream needs a real port, not 0") }
            guard proxy.upstream != proxy.listen else {
                throw bad("proxies[\(index)].upstream \(proxy.upstream) is the proxy's own listen address")
            }
            try proxy.tls?.checkInvariants("proxies[\(index)].tls", bad)
            if proxy.transport == .udp, proxy.tls != nil { throw bad("proxies[\(index)].tls: a udp:// proxy carries no TLS") }
            guard proxy.listen.port == 0 || listens.insert(proxy.listenText).inserted else {
                throw bad("proxies[\(index)].listen \(proxy.listenText) is already used by another proxy")
            }
        }
        for (role, process) in [("server", pair?.server), ("client", pair?.client)] {
            guard let process else { continue }
            try process.checkInvariants("pair.\(role)", bad)
        }
        if let spec = protocolSpec {
            try spec.checkInvariants(framings: framings, bad)
            if framings.traits(named: spec.framing.name)?.readsDatagrams == true, let tcp = proxies.first(where: { $0.transport == .tcp }) {
                throw bad("protocol.framing \(spec.framing.name) reads UDP datagrams, but proxy '\(tcp.name)' relays TCP (listen: udp://…)")
            }
            if framings.traits(named: spec.framing.name)?.readsQUICStreams == true, spec.transport != .quic {
                throw bad("protocol.framing \(spec.framing.name) reads HTTP/3 on QUIC streams: it needs protocol.transport quic")
            }
            if spec.transport == .quic {
                if spec.keylog == nil { throw bad("protocol.transport quic needs protocol.keylog") }
                if let tcp = proxies.first(where: { $0.transport == .tcp }) {
                    throw bad("protocol.transport quic reads QUIC over UDP, but proxy '\(tcp.name)' relays TCP (listen: udp://…)")
                }
            }
        }
        if let baseline { try baseline.checkInvariants("baseline", bad) }
        for (index, rule) in faults.enumerated() {
            try rule.checkInvariants("faults[\(index)]", proxies: names, bad)
            if let problem = Self.transportProblem(of: rule, proxies: proxies) { throw bad("faults[\(index)]: \(problem)") }
            try rule.checkProtocolFault("faults[\(index)]", framings: framings, bad)
            if rule.kind == .handshake, !proxies.contains(where: { $0.tls != nil && (rule.proxy == nil || rule.proxy == $0.name) }) {
                throw bad("faults[\(index)]: a handshake fault acts on TLS handshakes, but no proxy it reaches has a tls: block")
            }
            if rule.kind.actsOnThePair, pair?.server == nil {
                throw bad("faults[\(index)]: a \(rule.kind.rawValue) fault restarts the pair's server, but the scenario has no pair.server")
            }
            if rule.kind.actsOnThePair, rule.proxy != nil || rule.schedule.targets != .all {
                throw bad("faults[\(index)]: a \(rule.kind.rawValue) fault restarts the pair's server: it takes no proxy or targets")
            }
        }
        try checkFrameProtocol(framings: framings, bad)
    }

    /// A fault that only a TCP connection can meet (a cut, a TLS handshake, a protocol's frames) must reach a TCP
    /// proxy: what is wrong with one that names a UDP proxy, or is in a scenario whose proxies are all UDP (nil: nothing).
    package static func transportProblem(of rule: FaultRule, proxies: [ProxySpec]) -> String? {
        let reached = proxies.filter { rule.proxy == nil || rule.proxy == $0.name }
        if rule.kind.actsOnlyOnDatagrams, !reached.isEmpty, reached.allSatisfy({ $0.transport == .tcp }) {
            let which = rule.proxy.map { "proxy '\($0)' is TCP" } ?? "every proxy is TCP"
            return "a \(rule.kind.rawValue) fault acts on UDP datagrams (TCP never delivers twice or out of order), but \(which)"
        }
        guard !rule.kind.actsOnDatagrams else { return nil }
        guard !reached.isEmpty, reached.allSatisfy({ $0.transport == .udp }) else { return nil }
        let which = rule.proxy.map { "proxy '\($0)' is udp://" } ?? "every proxy is udp://"
        return "a \(rule.kind.rawValue) fault acts on TCP connections, but \(which) (faults on datagrams: \(FaultKind.datagramKindNames))"
    }

    /// The name of the frames the proxies follow: those of the plug-in that declares the scenario's
    /// protocol faults, if it names one.
    package func framesFollowed(framings: FramingCatalog) -> String? {
        faults.lazy.compactMap { framings.fault(named: $0.kind.rawValue)?.framing.frames }.first
    }

    /// A plug-in's faults need the proxies to follow one protocol's frames, the one the audit reads if any.
    func checkFrameProtocol(framings: FramingCatalog, _ bad: (String) -> ChaosError) throws {
        guard let frames = framesFollowed(framings: framings) else { return }
        for (index, rule) in faults.enumerated() {
            if let other = framings.fault(named: rule.kind.rawValue)?.framing.frames, other != frames {
                throw bad(
                    "faults[\(index)]: a \(rule.kind.rawValue) fault needs \(other) frames, but another fault "
                        + "needs \(frames) frames; one scenario can follow one protocol"
                )
            }
        }
        if let audited = protocolSpec?.framing, let auditedFrames = framings.traits(named: audited.name)?.frames, auditedFrames != frames {
            throw bad("protocol.framing reads \(audited.name), but a fault needs \(frames) frames")
        }
    }

    /// The lowest probability (other than 0) a fault may have: a rarer one would make the timeline draw
    /// billions of occurrences that never happen to find one that does.
    package static let leastProbability = 0.000_001

    static func check(
        _ duration: ChaosDuration,
        _ field: String,
        positive: Bool,
        _ bad: (String) -> ChaosError
    ) throws {
        guard duration.nanoseconds >= (positive ? 1 : 0), duration <= longestDuration else {
            throw bad("\(field) must be \(positive ? "above" : "at least") 0 and at most 10 years, found \(duration)")
        }
    }

    static func check(_ range: DurationRange, _ field: String, positive: Bool, _ bad: (String) -> ChaosError) throws {
        try check(range.lower, field, positive: positive, bad)
        try check(range.upper, field, positive: positive, bad)
        guard range.lower <= range.upper else { throw bad("\(field): the range runs backwards") }
    }

    static func check(_ targets: Targets, _ field: String, _ bad: (String) -> ChaosError) throws {
        switch targets {
        case .all: break
        case .count(let count) where count >= 1: break
        case .fraction(let fraction) where fraction > 0 && fraction <= 1: break
        case .each(let probability) where probability.isFinite && (0...1).contains(probability): break
        default: throw bad("\(field).targets must be all, a count of 1 or more, or a fraction above 0 and at most 1, found \(targets)")
        }
    }
}

extension ProtocolSpec {
    /// Checks the rules a protocol obeys however it was given (a scenario, `--set`, command-line flags, a run folder);
    /// `framings` are those it may name, `bad` makes the error for a broken rule.
    package func checkInvariants(framings: FramingCatalog, _ bad: (String) -> ChaosError) throws {
        guard let traits = framings.traits(named: framing.name) else {
            throw bad("protocol.framing must be one of \(framings.names.joined(separator: ", ")), found '\(framing.name)'")
        }
        do { try traits.check(framing) } catch let problem as FramingOptionProblem { throw bad(problem.message) }
        if !traits.hasRPCs, descriptors != nil || methods != nil {
            throw bad("protocol.descriptors and protocol.methods are for framing \(framings.namesWithRPCs)")
        }
        for method in methods ?? [] where !Self.isMethodPath(method) {
            throw bad("protocol.methods: '\(method)' is not an RPC path like /package.Service/Method")
        }
        if let maxMessage, !Self.messageCapRange.contains(maxMessage) {
            throw bad("protocol.max_message must be within \(Self.messageCapRange), found \(maxMessage)")
        }
        for (name, direction) in [("protocol", Direction?.none), ("protocol.upstream", .upstream), ("protocol.downstream", .downstream)] {
            let resolved = direction.map(resolved(for:)) ?? self
            guard !resolved.seq.isEmpty else { throw bad("\(name).seq is empty") }
            let prefix: String? =
                switch resolved.streamSource {
                case .header: "header:"
                case .query: "query:"
                case .rpc:
                    if traits.hasRPCs {
                        nil
                    } else {
                        throw bad("\(name).stream rpc (each call a stream) needs framing \(framings.namesWithRPCs); a field named rpc is /rpc")
                    }
                case .field, nil: nil
                }
            if let prefix, let stream = resolved.stream {
                guard traits.streamKeyPrefixes.contains(prefix) else {
                    throw bad("\(name).stream \(stream): \(framings.streamKeyMeaning(prefix))")
                }
                guard stream.count > prefix.count else { throw bad("\(name).stream \(stream) needs a name") }
            }
        }
        if format == .protobuf {
            guard traits.carriesBinary else {
                throw bad("protocol.format protobuf needs binary messages: framing \(framings.namesCarryingBinary)")
            }
            // Only the fields each direction reads: a shared default that both directions override is never used.
            // With descriptors, fields may be named; the reader checked the names against the descriptor set.
            for direction in Direction.allCases where descriptors == nil {
                for name in fieldNames(direction) where !name.isEmpty && !Self.isFieldNumberPath(name) {
                    throw bad(
                        "protocol.format protobuf reads fields by number path (2, or 4.1 for a nested field), "
                            + "found '\(name)' (\(direction))"
                    )
                }
            }
        }
        guard (0...Int64(Int32.max)).contains(seqStart) else {
            throw bad("protocol.seq_start must be within 0...\(Int32.max), found \(seqStart)")
        }
    }
}

extension LinkProfile {
    func checkInvariants(_ field: String, _ bad: (String) -> ChaosError) throws {
        try Scenario.check(latency, "\(field).latency", positive: false, bad)
        try Scenario.check(jitter, "\(field).jitter", positive: false, bad)
        for (name, rate) in [("bandwidth_up", bandwidthUp), ("bandwidth_down", bandwidthDown)] {
            if let rate, rate.bytesPerSecond < 1 { throw bad("\(field).\(name) must be at least 1 byte/s, found \(rate.bytesPerSecond)") }
        }
        if let radio { try FaultEffect.radio(radio).checkInvariants("\(field).radio", bad) }
        if let natIdleTimeout { try Scenario.check(natIdleTimeout, "\(field).nat.idle_timeout", positive: true, bad) }
    }
}

extension FaultRule {
    /// Checks one rule on its own (a fault added through the control API); `source` names where it came from.
    package func checkInvariants(source: String, proxies: Set<String>) throws {
        try checkInvariants("fault", proxies: proxies) { .badInput("\(source): \($0)") }
    }

    func checkInvariants(_ field: String, proxies: Set<String>, _ bad: (String) -> ChaosError) throws {
        if let proxy, !proxies.contains(proxy) { throw bad("\(field).proxy: no proxy named '\(proxy)'") }
        if let at = schedule.at { try Scenario.check(at, "\(field).at", positive: false, bad) }
        if let every = schedule.every {
            try Scenario.check(every, "\(field).every", positive: true, bad)
            guard every.lower >= .milliseconds(1) else { throw bad("\(field).every must be at least 1ms") }
        }
        if let lasts = schedule.lasts { try Scenario.check(lasts, "\(field).for", positive: false, bad) }
        try Scenario.check(schedule.after, "\(field).after", positive: false, bad)
        if let until = schedule.until { try Scenario.check(until, "\(field).until", positive: false, bad) }
        guard schedule.probability.isFinite, (0...1).contains(schedule.probability) else {
            throw bad("\(field).probability must be within 0...1, found \(schedule.probability)")
        }
        guard schedule.probability == 0 || schedule.probability >= Scenario.leastProbability else {
            throw bad("\(field).probability must be 0 or at least \(Scenario.leastProbability), found \(schedule.probability)")
        }
        try Scenario.check(schedule.targets, field, bad)
        try parameters.checkInvariants(field, bad)
    }
}

extension FaultSpec {
    /// The rules a fault's parameters obey, as written or as drawn (a drawn value is checked as a range of one).
    func checkInvariants(_ field: String, _ bad: (String) -> ChaosError) throws {
        switch self {
        case .disconnect(_, let linger): try Scenario.check(linger, "\(field).linger", positive: false, bad)
        case .latency(let add, let jitter, _):
            try Scenario.check(add.range, "\(field).add", positive: false, bad)
            try Scenario.check(jitter, "\(field).jitter", positive: false, bad)
        case .bandwidth(let rate, _):
            if rate.bytesPerSecond < 1 { throw bad("\(field).rate must be at least 1 byte/s, found \(rate.bytesPerSecond)") }
        case .handoff(let from, let to, let blackout, let linger, let deadWiFi, let newAddress):
            try from.checkInvariants("\(field).from", bad)
            try to.checkInvariants("\(field).to", bad)
            try Scenario.check(blackout.range, "\(field).blackout", positive: false, bad)
            try Scenario.check(linger, "\(field).linger", positive: false, bad)
            if let deadWiFi { try Scenario.check(deadWiFi.range, "\(field).dead_wifi", positive: false, bad) }
            if let newAddress {
                if newAddress.isEmpty { throw bad("\(field).new_address must name at least one local address, found none") }
                for address in newAddress where !SourceAddressPool.isIPAddress(address) {
                    throw bad("\(field).new_address must be IP addresses, found '\(address)'")
                }
            }
        case .radio(let radio):
            try Scenario.check(radio.promotion, "\(field).promotion", positive: false, bad)
            try Scenario.check(radio.tail, "\(field).tail", positive: true, bad)
        case .nat(let idleTimeout): try Scenario.check(idleTimeout, "\(field).idle_timeout", positive: true, bad)
        case .slice(let maxBytes, let delay, _, let variation):
            if maxBytes < 1 { throw bad("\(field).size must be at least 1 byte, found \(maxBytes)") }
            if let variation, variation < 0 { throw bad("\(field).variation must be at least 0 bytes, found \(variation)") }
            try Scenario.check(delay, "\(field).delay", positive: false, bad)
        case .link(let profile): try profile.checkInvariants("\(field).profile", bad)
        case .loss(let rate, let burst, _):
            if !(0...FaultParameters.maximumLossRate).contains(rate) {
                throw bad("\(field).rate must be between 0% and \(FaultParameters.percent(FaultParameters.maximumLossRate)), found \(rate)")
            }
            if !(1...FaultParameters.maximumLossBurst).contains(burst) {
                throw bad("\(field).burst must be between 1 and \(Int(FaultParameters.maximumLossBurst)) packets, found \(burst)")
            }
        case .duplicate(let rate, _), .reorder(let rate, _):
            if !(0...FaultParameters.maximumLossRate).contains(rate) {
                throw bad("\(field).rate must be between 0% and \(FaultParameters.percent(FaultParameters.maximumLossRate)), found \(rate)")
            }
        case .mtu(let size, _):
            if !FaultParameters.mtuRange.contains(size) {
                throw bad(
                    "\(field).size must be between \(FaultParameters.mtuRange.lowerBound) and \(FaultParameters.mtuRange.upperBound) bytes, found \(size)"
                )
            }
        case .protocolFault: break  // its declaration's rules: ``FaultRule/checkProtocolFault(_:framings:_:)``
        case .slowClose(let delay, _): try Scenario.check(delay, "\(field).delay", positive: false, bad)
        case .resetPeer(let after, _): try Scenario.check(after, "\(field).after", positive: false, bad)
        case .timeout(let after, _): if let after { try Scenario.check(after, "\(field).after", positive: true, bad) }
        case .limitData(let bytes, _): if bytes < 0 { throw bad("\(field).bytes must be at least 0, found \(bytes)") }
        case .restart(let down, _): try Scenario.check(down.range, "\(field).down", positive: false, bad)
        case .partition, .refuse, .stall, .handshake, .rebind: break
        }
    }
}

extension Timeline {
    /// Checks a timeline against the scenario it belongs to (`chaos replay` reads both from a run folder).
    package func checkInvariants(against scenario: Scenario, source: String) throws {
        func bad(_ what: String) -> ChaosError { .badInput("\(source): \(what)") }
        try Scenario.check(duration, "duration", positive: true, bad)
        let proxies = Set(scenario.proxies.map(\.name))
        guard case .recorded(let occurrences, _) = self.source else { return }  // drawn here: checked as its scenario
        for (index, occurrence) in occurrences.enumerated() {
            let field = "occurrences[\(index)]"
            // A timeline numbers its occurrences in order from 0; marks and reports are keyed by that number.
            guard occurrence.index == index else { throw bad("\(field).index must be \(index), found \(occurrence.index)") }
            guard scenario.faults.indices.contains(occurrence.rule) else {
                throw bad("\(field).rule must name one of scenario.json's \(scenario.faults.count) faults (0-based), found \(occurrence.rule)")
            }
            try Scenario.check(occurrence.at, "\(field).at", positive: false, bad)
            try Scenario.check(occurrence.lasts, "\(field).lasts", positive: false, bad)
            if let proxy = occurrence.proxy, !proxies.contains(proxy) { throw bad("\(field).proxy: no proxy named '\(proxy)'") }
            try Scenario.check(occurrence.targets, field, bad)
            try occurrence.effect.checkInvariants(field, bad)
            if case .protocolFault(let fault) = occurrence.effect,
                scenario.faults[occurrence.rule].parameters != .protocolFault(fault)
            {
                throw bad("\(field).effect: a \(fault.kind) fault must be as its rule in scenario.json wrote it")
            }
        }
    }
}

extension FaultRule {
    /// A plug-in's fault: a plug-in in `framings` declares its kind, and its fields obey the declaration.
    func checkProtocolFault(_ field: String, framings: FramingCatalog, _ bad: (String) -> ChaosError) throws {
        guard case .protocolFault(let name) = kind else { return }
        guard let declaration = framings.fault(named: name)?.declaration else {
            let known = framings.faultKinds.joined(separator: ", ")
            throw bad("\(field): no protocol declares a fault '\(name)' (the protocols' faults: \(known.isEmpty ? "none" : known))")
        }
        guard case .protocolFault(let fault) = parameters, fault.kind == name else {
            throw bad("\(field).parameters must be a \(name) fault's")
        }
        if let problem = declaration.problem(fault) { throw bad("\(field).\(problem)") }
    }
}

extension FaultParameters {
    /// The highest `loss.rate` (at 100% nothing would ever arrive: use a partition).
    package static let maximumLossRate = 0.99
    /// The longest mean `loss.burst`, in packets.
    package static let maximumLossBurst = 1000.0
    /// The packet sizes an `mtu` fault takes: IPv4's minimum MTU to the largest IP packet.
    package static let mtuRange = 68...65535
}

extension Array where Element == ClosedRange<Int> {
    func contains(_ value: Int) -> Bool { contains { $0.contains(value) } }
}

extension ProtocolSpec {
    /// `/package.Service/Method`: an RPC as its request's `:path` names it.
    static func isMethodPath(_ path: String) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 3 && parts[0].isEmpty && !parts[1].isEmpty && !parts[2].isEmpty
    }

    /// `2` or `4.1`: field numbers (1 to 2^29 - 1) joined by dots, as `format: protobuf` names fields.
    static func isFieldNumberPath(_ name: String) -> Bool { fieldNumberPath(name) != nil }

    /// `4.1` as [4, 1]; nil when it is not a dotted list of at most 32 field numbers (1 ... 2^29 - 1).
    package static func fieldNumberPath(_ name: String) -> [UInt64]? {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard !parts.isEmpty, parts.count <= 32 else { return nil }
        var numbers: [UInt64] = []
        for part in parts {
            guard let number = UInt64(part), (1...(1 << 29 - 1)).contains(number) else { return nil }
            numbers.append(number)
        }
        return numbers
    }
}
