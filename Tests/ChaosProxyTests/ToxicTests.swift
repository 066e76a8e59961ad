import ChaosCore
import Testing

@testable import ChaosControl
@testable import ChaosProxy

/// Toxiproxy's toxics and config file as chaos reads them, without sockets.
@Suite("Toxics and Toxiproxy's config file")
struct ToxicTests {
    static func toxic(
        _ type: String,
        _ stream: String = "downstream",
        _ set: (inout ToxicAttributes) -> Void = { _ in }
    )
        -> Toxic
    {
        var attributes = ToxicAttributes()
        set(&attributes)
        return Toxic(name: "t", type: type, stream: stream, toxicity: 1, attributes: attributes)
    }

    @Test("each type keeps only its own attributes, 0 where not given")
    func attributesPerType() {
        let latency = Self.toxic("latency") {
            $0.latency = 5
            $0.bytes = 9
        }
        #expect(latency.attributes.present.map(\.0) == ["latency", "jitter"])
        #expect(latency.attributes.jitter == 0 && latency.attributes.bytes == nil)
        #expect(Self.toxic("slicer").attributes.present.map(\.0) == ["delay", "average_size", "size_variation"])
        var update = ToxicAttributes()
        update.jitter = 3
        #expect(latency.attributes.updated(with: update).keeping(only: "latency").present.map(\.1) == [5, 3])
    }

    @Test(
        "each toxic maps onto chaos's faults in Toxiproxy's units",
        arguments: [
            (
                toxic("latency") {
                    $0.latency = 100
                    $0.jitter = 10
                },
                FaultEffect?.some(.latency(add: .milliseconds(100), jitter: .milliseconds(10), direction: .downstream))
            ),
            (toxic("bandwidth", "upstream") { $0.rate = 64 }, .bandwidth(rate: ByteRate(bytesPerSecond: 64_000), direction: .upstream)),
            (toxic("bandwidth") { $0.rate = 0 }, nil),
            (
                toxic("slicer") {
                    $0.average_size = 10
                    $0.size_variation = 4
                    $0.delay = 250
                },
                .slice(maxBytes: 10, delay: DurationRange(exactly: .microseconds(250)), direction: .downstream, variation: 4)
            ),
            (toxic("timeout") { $0.timeout = 0 }, .timeout(after: nil, direction: .downstream)),
            (toxic("timeout", "upstream") { $0.timeout = 300 }, .timeout(after: .milliseconds(300), direction: .upstream)),
            (toxic("reset_peer") { $0.timeout = 20 }, .resetPeer(after: .milliseconds(20), direction: .downstream)),
            (toxic("limit_data") { $0.bytes = 1000 }, .limitData(bytes: 1000, direction: .downstream)),
            (toxic("slow_close") { $0.delay = 500 }, .slowClose(delay: .milliseconds(500), direction: .downstream)),
        ]
    )
    func effects(_ toxic: Toxic, _ effect: FaultEffect?) {
        #expect(toxic.effect == effect)
    }

    @Test("a toxic is a fault occurrence from now on, on its proxy, reaching each connection with its toxicity")
    func occurrence() throws {
        var toxic = Self.toxic("slow_close") { $0.delay = 5 }
        toxic.toxicity = 0.25
        let occurrence = try #require(toxic.occurrence(proxy: "redis", seed: 9))
        #expect(occurrence.at == .zero && occurrence.proxy == "redis" && occurrence.targets == .each(0.25) && occurrence.seed == 9)
        #expect(occurrence.effect == toxic.effect && occurrence.kind == .slowClose)
        #expect(Self.toxic("bandwidth").occurrence(proxy: "redis", seed: 9) == nil)
    }

    @Test("numbers a client may send never overflow: they are clamped")
    func hugeNumbers() {
        let huge = Self.toxic("latency") {
            $0.latency = .max
            $0.jitter = -5
        }
        guard case .latency(let add, let jitter, _)? = huge.effect else {
            Issue.record("\(String(describing: huge.effect))")
            return
        }
        #expect(add.nanoseconds > 0 && jitter == .zero)
        #expect(Self.toxic("bandwidth") { $0.rate = .max }.effect != nil)
        #expect(
            Self.toxic("slicer") {
                $0.delay = .max
                $0.average_size = -3
            }.effect != nil
        )
    }

    @Test("toxicity is drawn once per (toxic, connection): 0 never, 1 always, 0.3 about 30 %, the same every time")
    func toxicity() {
        let never = ConnectionDraw(probability: 0, seed: 1)
        let always = ConnectionDraw(probability: 1, seed: 1)
        let some = ConnectionDraw(probability: 0.3, seed: 42)
        let ids = (1...2000).map { ConnectionID($0) }
        #expect(!ids.contains(where: never.reaches))
        #expect(ids.allSatisfy(always.reaches))
        let reached = ids.filter(some.reaches)
        #expect((500...700).contains(reached.count), "\(reached.count)")
        #expect(ids.reversed().filter(some.reaches) == reached.reversed())  // whatever the order they arrive in
        #expect(ids.filter(ConnectionDraw(probability: 0.3, seed: 43).reaches) != reached)
    }

    @Test(
        "a config file is Toxiproxy's JSON list; what is wrong names the file and the entry",
        arguments: [
            (#"{"name": "a"}"#, "f.json: not a Toxiproxy config (a JSON list of proxies)"),
            (#"[{"name": "a", "listen": "127.0.0.1:0"}]"#, "f.json: missing required field: upstream at proxy 1"),
            (#"[{"upstream": "127.0.0.1:1"}]"#, "f.json: missing required field: name at proxy 1"),
            (#"[{"name": "a", "upstream": "nowhere"}]"#, "upstream must be HOST:PORT, found 'nowhere' at proxy 1"),
            (#"[{"name": "a", "upstream": "127.0.0.1:1"}, {"name": "a", "upstream": "127.0.0.1:2"}]"#, "proxy 2: the name 'a' is used twice"),
            (#"[{"name": "a", "upstream": "127.0.0.1:1", "enabled": "yes"}]"#, "expected Bool at [0].enabled"),
        ]
    )
    func badConfig(_ text: String, _ message: String) {
        #expect {
            try ToxiproxyConfig.parse(text, file: "f.json")
        } throws: { error in
            (error as? ChaosError)?.code == .badInput && "\(error)".contains(message)
        }
    }

    @Test("a good config gives each proxy, enabled unless it says not")
    func goodConfig() throws {
        let entries = try ToxiproxyConfig.parse(
            #"""
            [{"name": "redis", "listen": "127.0.0.1:26379", "upstream": "127.0.0.1:6379"},
             {"name": "pg", "listen": ":15432", "upstream": "db.internal:5432", "enabled": false}]
            """#,
            file: "f.json"
        )
        #expect(entries.map(\.spec.name) == ["redis", "pg"])
        #expect(entries.map(\.enabled) == [true, false])
        #expect(entries[1].spec.listen == HostPort(host: "0.0.0.0", port: 15432))
    }
}
