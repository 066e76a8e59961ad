import ChaosCore
import ChaosProxy
import Foundation
import NIOHTTP1
import Synchronization

/// Toxiproxy's toxic routes: each toxic becomes a chaos fault on the proxy's connections (see ``Toxic/effect``),
/// reaching each connection with probability `toxicity`, drawn from the API's seed.
extension ControlAPI {
    /// A toxic as a request gives it (every field optional; an update changes only what it gives).
    struct ToxicBody: Decodable {
        var name: String?
        var type: String?
        var stream: String?
        var toxicity: Double?
        var attributes: ToxicAttributes?
    }

    func toxics(of proxy: String) -> APIResponse {
        guard let managed = state.withLock({ $0.proxies[proxy] }) else { return Self.proxyNotFound }
        return .json(managed.toxics.map(\.toxic))
    }

    func showToxic(_ name: String, on proxy: String) -> APIResponse {
        guard let managed = state.withLock({ $0.proxies[proxy] }) else { return Self.proxyNotFound }
        guard let toxic = managed.toxics.first(where: { $0.toxic.name == name }) else { return Self.toxicNotFound }
        return .json(toxic.toxic)
    }

    static let toxicNotFound = APIResponse.error("toxic not found", status: .notFound)

    /// `POST /proxies/{name}/toxics`: 200 with the toxic (Toxiproxy's defaults filled in).
    func createToxic(on proxy: String, body: String) async -> APIResponse {
        guard let managed = state.withLock({ $0.proxies[proxy] }) else { return Self.proxyNotFound }
        let request: ToxicBody
        switch decode(ToxicBody.self, from: body) {
        case .success(let decoded): request = decoded
        case .failure(let error): return error.response
        }
        let stream = (request.stream ?? "downstream").lowercased() // as Toxiproxy, in any case
        guard stream == "upstream" || stream == "downstream" else {
            return .error("stream was invalid, can be either upstream or downstream", status: .badRequest)
        }
        guard let type = request.type, Toxic.types.contains(type) else {
            return .error("invalid toxic type: \(request.type.map { "'\($0)'" } ?? "missing"); chaos knows "
                + Toxic.types.joined(separator: ", "), status: .badRequest)
        }
        let name = request.name.flatMap { $0.isEmpty ? nil : $0 } ?? "\(type)_\(stream)"
        guard !managed.toxics.contains(where: { $0.toxic.name == name }) else {
            return .error("toxic already exists", status: .conflict)
        }
        let toxicity = request.toxicity ?? 1
        guard (0...1).contains(toxicity) else {
            return .error("bad request body: toxicity must be between 0 and 1, found \(toxicity)", status: .badRequest)
        }
        let toxic = Toxic(name: name, type: type, stream: stream, toxicity: toxicity,
                          attributes: request.attributes ?? ToxicAttributes())
        let id = state.withLock { $0.nextID() }
        let added = ManagedToxic(toxic: toxic, key: ShapingKey(timeline: id, occurrence: 0), proxy: proxy)
        state.withLock { $0.proxies[proxy]?.toxics.append(added) }
        record(.faultStarted(added.mark))
        await managed.server.addToxic(connectionToxic(added), key: added.key)
        return .json(toxic)
    }

    /// `POST /proxies/{name}/toxics/{toxic}`: new attributes (only those given) and toxicity; 200.
    func updateToxic(_ name: String, on proxy: String, body: String) async -> APIResponse {
        guard let managed = state.withLock({ $0.proxies[proxy] }) else { return Self.proxyNotFound }
        guard let index = managed.toxics.firstIndex(where: { $0.toxic.name == name }) else { return Self.toxicNotFound }
        let request: ToxicBody
        switch decode(ToxicBody.self, from: body) {
        case .success(let decoded): request = decoded
        case .failure(let error): return error.response
        }
        var updated = managed.toxics[index]
        if let toxicity = request.toxicity {
            guard (0...1).contains(toxicity) else {
                return .error("bad request body: toxicity must be between 0 and 1, found \(toxicity)", status: .badRequest)
            }
            updated.toxic.toxicity = toxicity
        }
        if let attributes = request.attributes {
            updated.toxic.attributes = updated.toxic.attributes.updated(with: attributes).keeping(only: updated.toxic.type)
        }
        await removeToxic(managed.toxics[index], from: managed.server)
        state.withLock { $0.proxies[proxy]?.toxics[index] = updated }
        record(.faultStarted(updated.mark))
        await managed.server.addToxic(connectionToxic(updated), key: updated.key)
        return .json(updated.toxic)
    }

    /// `DELETE /proxies/{name}/toxics/{toxic}`: 204.
    func deleteToxic(_ name: String, on proxy: String) async -> APIResponse {
        guard let managed = state.withLock({ $0.proxies[proxy] }) else { return Self.proxyNotFound }
        guard let toxic = managed.toxics.first(where: { $0.toxic.name == name }) else { return Self.toxicNotFound }
        state.withLock { $0.proxies[proxy]?.toxics.removeAll { $0.toxic.name == name } }
        await removeToxic(toxic, from: managed.server)
        return .noContent
    }

    /// Lifts a toxic from a proxy's connections and ends its mark.
    func removeToxic(_ toxic: ManagedToxic, from server: ProxyServer) async {
        await server.removeToxic(key: toxic.key)
        record(.faultEnded(toxic.mark))
    }

    /// The toxic as the proxy applies it; its per-connection draws come from the API's seed forked by its id.
    func connectionToxic(_ toxic: ManagedToxic) -> ConnectionToxic {
        var generator = SeededGenerator(seed: seed).fork("toxic", UInt64(toxic.key.timeline))
        return ConnectionToxic(effect: toxic.toxic.effect, toxicity: toxic.toxic.toxicity, seed: generator.next())
    }
}
