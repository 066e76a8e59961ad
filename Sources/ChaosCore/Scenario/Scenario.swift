/// A parsed, validated scenario file: which proxies to run, what pair to start, what the traffic
/// looks like, which faults to inject and what must hold at the end.
///
/// Build one with ``Scenario/parse(yaml:file:)`` or ``Scenario/load(path:)``; the fault
/// timeline comes from ``Timeline/init(scenario:seed:)``.
package struct Scenario: Sendable, Codable, Equatable {
    /// Whether `name` can name a scenario (and its run folder): letters, digits, '-', '_' or '.', not empty,
    /// not `.` or `..`.
    package static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && name.allSatisfy { $0.isLetter || $0.isNumber || "-_.".contains($0) }
    }

    /// The scenario's name, used for the report folder.
    package var name: String
    /// How long a run lasts.
    package var duration: ChaosDuration
    /// The seed in the file, if it names one.
    package var seed: UInt64?
    /// The proxies to run, at least one.
    package var proxies: [ProxySpec]
    /// The client/server pair to start, when the scenario names one.
    package var pair: PairSpec?
    /// How to read messages out of the byte stream, for the audit.
    package var protocolSpec: ProtocolSpec?
    /// The link profile every new connection starts with (none: the loopback as it is).
    package var baseline: LinkProfile?
    /// The fault rules, in file order.
    package var faults: [FaultRule]
    /// What must hold for the run to pass, in file order.
    package var expectations: [Expectation]
    /// Whether and how to capture the proxied traffic.
    package var capture: CaptureSpec?
    /// The path the scenario was read from.
    package var file: String
    /// `fleet:`: how a fleet's agents share the timeline (nil: shared).
    package var fleet: FleetSpec?

    /// Creates a scenario; prefer ``Scenario/load(path:)``, which validates.
    package init(
        name: String,
        duration: ChaosDuration,
        seed: UInt64?,
        proxies: [ProxySpec],
        pair: PairSpec?,
        protocolSpec: ProtocolSpec?,
        baseline: LinkProfile?,
        faults: [FaultRule],
        expectations: [Expectation],
        capture: CaptureSpec?,
        file: String
    ) {
        self.name = name
        self.duration = duration
        self.seed = seed
        self.proxies = proxies
        self.pair = pair
        self.protocolSpec = protocolSpec
        self.baseline = baseline
        self.faults = faults
        self.expectations = expectations
        self.capture = capture
        self.file = file
    }

    enum CodingKeys: String, CodingKey {
        case name, duration, seed, proxies, pair
        case protocolSpec = "protocol"
        case baseline, faults
        case expectations = "expect"
        case capture, file, fleet
    }
}

/// One proxy: accept on `listen`, connect each client to `upstream` (TCP), or relay each client address's datagrams
/// to `upstream` as a flow (UDP: `udp://` on both).
package struct ProxySpec: Sendable, Codable, Equatable {
    /// The proxy's name (faults may name it in `proxy:`).
    package var name: String
    /// Where clients connect.
    package var listen: HostPort
    /// Where the proxy connects for each client.
    package var upstream: HostPort
    /// TLS on both legs (`tls:`): terminated from the client with chaos's CA, opened again to the upstream; nil: cleartext.
    package var tls: TLSSpec?
    /// What it relays: TCP connections, or UDP datagrams in flows.
    package var transport: Transport

    /// Creates a proxy spec.
    package init(name: String, listen: HostPort, upstream: HostPort, tls: TLSSpec? = nil, transport: Transport = .tcp) {
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.tls = tls
        self.transport = transport
    }

    enum CodingKeys: String, CodingKey {
        case name, listen, upstream, tls, transport
    }

    /// Reads a spec written before proxies had a transport as TCP.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        listen = try container.decode(HostPort.self, forKey: .listen)
        upstream = try container.decode(HostPort.self, forKey: .upstream)
        tls = try container.decodeIfPresent(TLSSpec.self, forKey: .tls)
        transport = try container.decodeIfPresent(Transport.self, forKey: .transport) ?? .tcp
    }

    /// Writes a TCP proxy as before proxies had a transport (a run folder's `scenario.json` stays byte for byte).
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(listen, forKey: .listen)
        try container.encode(upstream, forKey: .upstream)
        try container.encodeIfPresent(tls, forKey: .tls)
        if transport != .tcp { try container.encode(transport, forKey: .transport) }
    }

    /// `listen` as written: `udp://` before a UDP proxy's address.
    package var listenText: String { transport.prefix + listen.description }
    /// `upstream` as written: `udp://` before a UDP proxy's address.
    package var upstreamText: String { transport.prefix + upstream.description }
}

/// What a proxy relays.
package enum Transport: String, Sendable, Codable, Equatable, CaseIterable {
    /// TCP connections (an address with no scheme, or `tcp://`).
    case tcp
    /// UDP datagrams, a flow per client address and port (`udp://`).
    case udp

    /// The scheme written before an address of this transport (none for TCP, the default).
    package var prefix: String { self == .tcp ? "" : "\(rawValue)://" }

    /// Splits `udp://127.0.0.1:9000` into its transport and address text; no scheme is TCP. Nil for an unknown scheme.
    package static func split(_ text: String) -> (transport: Transport, address: String)? {
        let text = text.trimmingWhitespace
        let parts = text.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return (.tcp, text) }
        guard let transport = Transport(rawValue: parts[0].lowercased()) else { return nil }
        return (transport, String(parts[1]))
    }
}

/// A numeric IPv4/IPv6 address or host name with a port, written `127.0.0.1:7000` or `[::1]:7000`.
package struct HostPort: Sendable, Codable, Equatable, Hashable, CustomStringConvertible {
    /// The host: an IP address or a name.
    package var host: String
    /// The TCP port, 0 to 65535 (0: any free port, for listening).
    package var port: Int

    /// Creates an address.
    package init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` or `[v6]:port`; nil when it is not of that form.
    package init?(parsing text: String) {
        let text = text.trimmingWhitespace
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            hostPart = text[text.index(after: text.startIndex)..<close]
            portPart = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
        }
        guard !hostPart.isEmpty, hostPart.allSatisfy({ $0.isLetter || $0.isNumber || ".-_:".contains($0) }),
            let port = Int(portPart), (0...65535).contains(port)
        else { return nil }
        self.init(host: String(hostPart), port: port)
    }

    package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// The process pair under test.
package struct PairSpec: Sendable, Codable, Equatable {
    /// The server, started first.
    package var server: ProcessSpec?
    /// The clients, started once the server is ready.
    package var client: ProcessSpec?

    /// Creates a pair spec.
    package init(server: ProcessSpec?, client: ProcessSpec?) {
        self.server = server
        self.client = client
    }
}

/// A command to start (and stop) for a run.
package struct ProcessSpec: Sendable, Codable, Equatable {
    /// The command line, with `{listen.port}`, `{upstream.port}`, `{index}` placeholders.
    package var run: String
    /// A readiness check: `tcp HOST:PORT` waits until it accepts (the server). A client's `connected` waits until
    /// every client has a connection through a proxy, and the run's timeline (its faults and its duration) starts
    /// then, not at the proxies' start: a pair that is slow to start on a loaded machine still meets its faults at
    /// the times the scenario gives, counted from the moment it is up.
    package var ready: String?
    /// How many copies to start (clients), 1 by default.
    package var count: Int
    /// How long to wait after SIGTERM before SIGKILL.
    package var stopGrace: ChaosDuration

    enum CodingKeys: String, CodingKey {
        case run, ready, count
        case stopGrace = "stop_grace"
    }

    /// Creates a process spec.
    package init(run: String, ready: String?, count: Int, stopGrace: ChaosDuration) {
        self.run = run
        self.ready = ready
        self.count = count
        self.stopGrace = stopGrace
    }
}

/// Whether to write `capture.pcap` and how big the ring may grow.
package struct CaptureSpec: Sendable, Codable, Equatable {
    /// Whether capture is on.
    package var enabled: Bool
    /// The size bound of the capture ring in bytes; nil: unbounded single file.
    package var ringBytes: Int64?

    /// Creates a capture spec.
    package init(enabled: Bool, ringBytes: Int64?) {
        self.enabled = enabled
        self.ringBytes = ringBytes
    }
}
