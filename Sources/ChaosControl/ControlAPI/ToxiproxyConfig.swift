package import ChaosCore
import ChaosProxy
import Foundation

/// Toxiproxy's config file (`toxiproxy-server -config FILE`, `chaos proxy --config FILE`): a JSON list of
/// proxies, `[{"name": "redis", "listen": "127.0.0.1:26379", "upstream": "127.0.0.1:6379", "enabled": true}]`.
package enum ToxiproxyConfig {
    /// One proxy of the file.
    package struct Entry: Sendable, Equatable {
        /// Its name, addresses.
        package var spec: ProxySpec
        /// Whether it accepts connections from the start (default true).
        package var enabled: Bool
    }

    /// Reads `path`; a `badInput` ``ChaosError`` names the file and what is wrong (which entry, which field).
    package static func load(path: String) throws -> [Entry] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ChaosError(.badInput, "\(path): cannot read the file")
        }
        return try parse(String(decoding: data, as: UTF8.self), file: path)
    }

    /// Parses a config file's text; `file` names it in errors.
    package static func parse(_ text: String, file: String) throws -> [Entry] {
        let bodies: [ControlAPI.ProxyBody]
        do {
            bodies = try JSONDecoder().decode([ControlAPI.ProxyBody].self, from: Data(text.utf8))
        } catch let error as DecodingError {
            throw ChaosError(.badInput, "\(file): not a Toxiproxy config (a JSON list of proxies): \(error.summary)")
        }
        var entries: [Entry] = []
        var names = Set<String>()
        for (index, body) in bodies.enumerated() {
            switch ControlAPI.spec(body, at: index) {
            case .success(let spec):
                guard names.insert(spec.name).inserted else {
                    throw ChaosError(.badInput, "\(file): proxy \(index + 1): the name '\(spec.name)' is used twice")
                }
                entries.append(Entry(spec: spec, enabled: body.enabled ?? true))
            case .failure(let error):
                let message = (try? JSONDecoder().decode(APIError.self, from: Data(error.response.body.utf8)))?.error ?? "invalid"
                throw ChaosError(.badInput, "\(file): \(message)")
            }
        }
        return entries
    }
}
