import ChaosCore
import ChaosProxy
import Foundation
import NIOHTTP1
import Synchronization

/// Toxiproxy's toxic routes: each toxic becomes a fault occurrence on the proxy's connections (see ``Toxic/effect``),
/// applied by a ``FaultInjector`` as a scenario's are, reaching each connection with probability `toxicity`, drawn
/// from the API's seed.
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
        let stream = (request.stream ?? "downstream").lowercased()  // as Toxiproxy, in any case
        guard stream == "upstream" || stream == "downstream" else {
            return .error("stream was invalid, can be either upstream or downstream", status: .badRequest)
        }
        guard let type = request.type, Toxic.types.contains(type) else {
            return .error(
                "invalid toxic type: \(request.type.map { "'\($0)'" } ?? "missing"); chaos knows "
                    + Toxic.types.joined(separator: ", "),
                status: .badRequest
            )
        }
        let name = request.name.flatMap { $0.isEmpty ? nil : $0 } ?? "\(type)_\(stream)"
        guard !managed.toxics.contains(where: { $0.toxic.name == name }) else {
            return .error("toxic already exists", status: .conflict)
        }
        let toxicity = request.toxicity ?? 1
        guard (0...1).contains(toxicity) else {
            return .error("bad request body: toxicity must be between 0 and 1, found \(toxicity)", status: .badRequest)
        }
        let toxic = Toxic(
            name: name,
            type: type,
            stream: stream,
            toxicity: toxicity,
            attributes: request.attributes ?? ToxicAttributes()
        )
        let id = state.withLock { $0.nextID() }
        let added = ManagedToxic(toxic: toxic, key: ShapingKey(timeline: id, occurrence: 0), proxy: proxy)
        state.withLock { $0.proxies[proxy]?.toxics.append(added) }
        record(.faultStarted(added.mark))
        let hit = await applyToxic(added, on: managed.server)
        // Counted once, as it is added: an update re-applies it, and its active count is read off the proxy's toxics.
        faultTally.began(type, connections: hit, lasting: false)
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
        await applyToxic(updated, on: managed.server)
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

    /// Applies a toxic to a proxy's connections, live and new (applied, not just queued, on return). Its marks
    /// are the API's (``ManagedToxic/mark``), not the injector's. Returns how many live connections it hit.
    @discardableResult
    func applyToxic(_ toxic: ManagedToxic, on server: ProxyServer) async -> Int {
        guard let occurrence = occurrence(of: toxic) else { return 0 }
        return await injector(of: toxic, on: server).apply(occurrence).connections
    }

    /// Lifts a toxic from a proxy's connections and ends its mark.
    func removeToxic(_ toxic: ManagedToxic, from server: ProxyServer) async {
        if let occurrence = occurrence(of: toxic) { await injector(of: toxic, on: server).lift(occurrence) }
        record(.faultEnded(toxic.mark))
    }

    /// The toxic as a fault occurrence; its per-connection draws come from the API's seed forked by its id.
    private func occurrence(of toxic: ManagedToxic) -> FaultOccurrence? {
        var generator = SeededGenerator(seed: seed).fork("toxic", UInt64(toxic.key.timeline))
        return toxic.toxic.occurrence(proxy: toxic.proxy, seed: generator.next())
    }

    /// The injector that applies the toxic (numbered by its id, as its shaping key says).
    private func injector(of toxic: ManagedToxic, on server: ProxyServer) -> FaultInjector {
        FaultInjector(number: toxic.key.timeline, proxies: [server], clock: factory.clock, sink: nil)
    }
}
