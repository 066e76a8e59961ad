import Foundation
import Testing

/// `chaos replay` reads scenario.json and timeline.json from a folder that a person or a crash may have damaged:
/// each absurd value is exit 2 naming the file and the field, never a trap mid-run.
@Suite("chaos replay of a damaged run folder", .serialized, .timeLimit(.minutes(5)))
struct DamagedRunFolderTests {
    typealias JSON = [String: Any]

    /// A real run folder to damage (a 1-second run with slice, bandwidth and a targeted disconnect).
    static func makeFolder() async throws -> URL {
        let listen = ChaosCLI.freePort()
        let upstream = ChaosCLI.freePort()
        let scenario = try ChaosCLI.scenarioFile(
            """
            name: damaged
            duration: 1s
            seed: 4
            proxies:
              - {name: s, listen: "127.0.0.1:\(listen)", upstream: "127.0.0.1:\(upstream)"}
            pair:
              server:
                run: chaos demo server --listen 127.0.0.1:{upstream.port}
                ready: tcp 127.0.0.1:{upstream.port}
            protocol:
              framing: lines
            faults:
              - slice: {at: 100ms, for: 100ms, size: 5}
              - bandwidth: {at: 200ms, for: 100ms, rate: 10KB/s}
              - disconnect: {at: 300ms, targets: 2}
            """
        )
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("damaged-\(UUID().uuidString)")
        let run = try await ChaosCLI.run(["run", scenario, "--out", folder.path], timeout: 60)
        // No client: nothing went through the proxy, so the run is inconclusive (exit 1), with every report written.
        #expect(run.status == 1 && run.stdout.contains("verdict: INCONCLUSIVE"), "\(run.stdout)\n\(run.stderr)")
        return folder
    }

    static func edit(_ folder: URL, _ file: String, _ change: (inout JSON) -> Void) throws {
        let url = folder.appendingPathComponent(file)
        var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? JSON)
        change(&json)
        try JSONSerialization.data(withJSONObject: json).write(to: url)
    }

    /// Sets `value` at `path` (keys and array indexes) inside `json`.
    static func set(_ json: inout JSON, _ path: [Any], _ value: Any) {
        func update(_ node: Any, _ path: ArraySlice<Any>) -> Any {
            guard let key = path.first else { return value }
            if var array = node as? [Any], let index = key as? Int {
                array[index] = update(array[index], path.dropFirst())
                return array
            }
            var object = node as? JSON ?? [:]
            object[key as! String] = update(object[key as! String] ?? [:], path.dropFirst())
            return object
        }
        json = update(json, path[...]) as! JSON
    }

    static var damages: [(String, String, [Any], Any, String)] {
        [
            ("a negative target count", "timeline.json", ["occurrences", 2, "targets", "count", "_0"], -3, "targets"),
            ("a slice of -1 bytes", "timeline.json", ["occurrences", 0, "effect", "slice", "maxBytes"], -1, "size"),
            ("a bandwidth of 0", "timeline.json", ["occurrences", 1, "effect", "bandwidth", "rate", "bytesPerSecond"], 0, "rate"),
            ("a seq start of Int64.min", "scenario.json", ["protocol", "seqStart"], Int64.min, "seq_start"),
            ("a pair count of 0", "scenario.json", ["pair", "server", "count"], 0, "count"),
            ("a pair count of -1", "scenario.json", ["pair", "server", "count"], -1, "count"),
            ("no proxies", "scenario.json", ["proxies"], [Any](), "proxies"),
            ("a scenario slice of -1 bytes", "scenario.json", ["faults", 0, "parameters", "slice", "maxBytes"], -1, "size"),
            // What a black-box fuzzer found: each ran (or trapped building its message) instead of exit 2.
            // JSON has no infinity: a number too large for a Double is refused as the file is read.
            ("a non-finite target fraction", "timeline.json", ["occurrences", 2, "targets"], ["fraction": ["_0": 0.25]], "not valid JSON"),
            ("a huge target fraction", "timeline.json", ["occurrences", 2, "targets"], ["fraction": ["_0": 1e300]], "targets"),
            ("a target count of 0", "timeline.json", ["occurrences", 2, "targets", "count", "_0"], 0, "targets"),
            ("an occurrence index at Int64.max", "timeline.json", ["occurrences", 0, "index"], Int64.max, "index"),
            ("an occurrence of no rule", "timeline.json", ["occurrences", 0, "rule"], 7, "rule"),
            ("a listen port out of range", "scenario.json", ["proxies", 0, "listen", "port"], 70_000, "listen"),
            ("an upstream port of 0", "scenario.json", ["proxies", 0, "upstream", "port"], 0, "upstream"),
            ("a readiness check that is not tcp", "scenario.json", ["pair", "server", "ready"], "udp 127.0.0.1:1", "ready"),
        ]
    }

    @Test("each damage is exit 2 naming the file and the field")
    func damagedFolders() async throws {
        let original = try await Self.makeFolder()
        defer { try? FileManager.default.removeItem(at: original) }
        for (what, file, path, value, field) in Self.damages {
            let copy = FileManager.default.temporaryDirectory.appendingPathComponent("damaged-copy-\(UUID().uuidString)")
            try FileManager.default.copyItem(at: original, to: copy)
            defer { try? FileManager.default.removeItem(at: copy) }
            try Self.edit(copy, file) { Self.set(&$0, path, value) }
            if what.hasPrefix("a non-finite") {
                // JSONSerialization writes no infinity: the number is put in as text, as a hand or a fuzzer would.
                let url = copy.appendingPathComponent(file)
                let text = try String(contentsOf: url, encoding: .utf8).replacingOccurrences(of: "0.25", with: "1e400")
                try text.write(to: url, atomically: true, encoding: .utf8)
            }
            let out = copy.appendingPathComponent("replayed").path
            let result = try await ChaosCLI.run(["replay", copy.path, "--out", out], timeout: 30)
            #expect(result.status == 2, "\(what): exit \(result.status)\n\(result.stderr)")
            #expect(result.stderr.contains(file) && result.stderr.contains(field), "\(what): \(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out), "\(what): nothing created")
        }
    }
}
