import ChaosCore
import ChaosProxy
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// Toxiproxy's proxy routes: proxies are created, changed and deleted while the run goes on.
extension ControlAPI {
    /// A proxy as a request gives it (Toxiproxy's fields; each may be missing).
    struct ProxyBody: Codable, Sendable {
        var name: String?
        var listen: String?
        var upstream: String?
        var enabled: Bool?
        /// A `tls:` block as a scenario writes it (`{"upstream": "insecure"}`); `false` (on an update): cleartext.
        var tls: JSONValue?
    }

    /// A proxy as Toxiproxy shows it.
    struct ProxyView: Encodable {
        var name: String
        var listen: String
        var upstream: String
        var enabled: Bool
        var toxics: [Toxic]
        var tls: TLSSpec.Form?
    }

    func view(_ proxy: Managed) -> ProxyView {
        ProxyView(
            name: proxy.spec.name,
            listen: proxy.spec.transport.prefix + (proxy.server.boundAddress?.hostPort ?? "\(proxy.spec.listen)"),
            upstream: proxy.spec.upstreamText,
            enabled: proxy.enabled,
            toxics: proxy.toxics.map(\.toxic),
            tls: proxy.spec.tls?.form
        )
    }

    /// `GET /proxies`: an object keyed by name.
    func proxyViews() -> [String: ProxyView] {
        let proxies = state.withLock { $0.proxies }
        return proxies.mapValues(view)
    }

    func showProxy(_ name: String) -> APIResponse {
        guard let proxy = state.withLock({ $0.proxies[name] }) else { return Self.proxyNotFound }
        return .json(view(proxy))
    }

    static let proxyNotFound = APIResponse.error("proxy not found", status: .notFound)

    /// The spec a body asks for, or Toxiproxy's 400. `listen` defaults to `127.0.0.1:0` (any free port). `udp://` on
    /// `listen` or `upstream` (or both) makes a UDP proxy, as in a scenario; an address without a scheme takes the other's.
    static func spec(_ body: ProxyBody, at index: Int? = nil) -> Result<ProxySpec, APIResponseError> {
        let suffix = index.map { " at proxy \($0 + 1)" } ?? ""
        guard let name = body.name, !name.isEmpty else {
            return .failure(APIResponseError(.error("missing required field: name\(suffix)", status: .badRequest)))
        }
        guard let upstreamText = body.upstream, !upstreamText.isEmpty else {
            return .failure(APIResponseError(.error("missing required field: upstream\(suffix)", status: .badRequest)))
        }
        func badRequest(_ message: String) -> Result<ProxySpec, APIResponseError> {
            .failure(APIResponseError(.error("bad request body: \(message)\(suffix)", status: .badRequest)))
        }
        guard let listenParts = Transport.split(body.listen ?? ""), let upstreamParts = Transport.split(upstreamText) else {
            return badRequest("an unknown scheme in listen '\(body.listen ?? "")' or upstream '\(upstreamText)' (udp:// or tcp://, or none for TCP)")
        }
        let listenScheme = (body.listen ?? "").contains("://") ? listenParts.transport : nil
        let upstreamScheme = upstreamText.contains("://") ? upstreamParts.transport : nil
        if let listenScheme, let upstreamScheme, listenScheme != upstreamScheme {
            return badRequest(
                "upstream is \(upstreamScheme.rawValue) but listen is \(listenScheme.rawValue): a proxy relays one transport (write udp:// on both, or on one)"
            )
        }
        let transport = listenScheme ?? upstreamScheme ?? .tcp
        var listenText = listenParts.address
        if listenText.isEmpty { listenText = "127.0.0.1:0" }
        if listenText.hasPrefix(":") { listenText = "0.0.0.0" + listenText }
        guard let listen = HostPort(parsing: listenText) else {
            return badRequest("listen must be HOST:PORT, found '\(listenText)'")
        }
        guard let upstream = HostPort(parsing: upstreamParts.address), upstream.port > 0 else {
            return badRequest("upstream must be HOST:PORT, found '\(upstreamText)'")
        }
        var spec = ProxySpec(name: name, listen: listen, upstream: upstream, transport: transport)
        if let tls = body.tls, tls != .bool(false) {
            if transport == .udp { return badRequest("a udp:// proxy carries no TLS") }
            do {
                spec.tls = try TLSSpec.parse(tls.jsonText, source: "tls")
            } catch let error as ChaosError {
                return badRequest(error.message)
            } catch {
                return badRequest("tls: \(error)")
            }
        }
        return .success(spec)
    }

    /// `POST /proxies`: 201 with the proxy (its bound `listen`), 409 when the name is taken.
    func createProxy(_ body: String) async -> APIResponse {
        let spec: ProxySpec
        let enabled: Bool
        switch decode(ProxyBody.self, from: body).flatMap({ body in Self.spec(body).map { ($0, body.enabled ?? true) } }) {
        case .success(let result): (spec, enabled) = result
        case .failure(let error): return error.response
        }
        if state.withLock({ $0.proxies[spec.name] != nil }) { return .error("proxy already exists", status: .conflict) }
        switch await open(spec, enabled: enabled, toxics: []) {
        case .success(let proxy): return .json(view(proxy), status: .created)
        case .failure(let error): return error.response
        }
    }

    /// Starts a proxy for `spec` with `toxics` on and keeps it; a listen address that cannot be bound is a 500
    /// naming it, as in Toxiproxy; one that does not resolve, a 400.
    func open(_ spec: ProxySpec, enabled: Bool, toxics: [ManagedToxic]) async -> Result<Managed, APIResponseError> {
        let server = factory.make(spec)
        do {
            try await server.start()
        } catch let error as ChaosError where error.code == .badInput {
            // A listen host that does not resolve is the request's fault.
            return .failure(APIResponseError(.error("bad request body: \(error.message)", status: .badRequest)))
        } catch let error as ChaosError {
            return .failure(APIResponseError(.error(error.message, status: .internalServerError)))
        } catch {
            return .failure(APIResponseError(.error("\(error)", status: .internalServerError)))
        }
        for toxic in toxics {
            // A proxy restarted at a new address carries its toxics over (`close` ended their marks).
            record(.faultStarted(toxic.mark))
            await applyToxic(toxic, on: server)
        }
        if !enabled { await server.disable() }
        let proxy = Managed(server: server, spec: spec, enabled: enabled, toxics: toxics)
        state.withLock { state in
            if state.proxies[spec.name] == nil { state.order.append(spec.name) }
            state.proxies[spec.name] = proxy
        }
        return .success(proxy)
    }

    /// `POST /proxies/{name}`: changes `enabled`, `listen`, `upstream` (a new address restarts the proxy,
    /// its toxics kept; its live connections are reset).
    func updateProxy(_ name: String, body: String) async -> APIResponse {
        guard let proxy = state.withLock({ $0.proxies[name] }) else { return Self.proxyNotFound }
        let update: ProxyBody
        switch decode(ProxyBody.self, from: body) {
        case .success(let decoded): update = decoded
        case .failure(let error): return error.response
        }
        // A client that sends the proxy back as it got it (Go's Save, toxiproxy-cli toggle) sends the bound address
        // as `listen`: that is no change (else the proxy would restart and reset its connections).
        // Addresses without a scheme keep the proxy's transport.
        func keepingTransport(_ address: String) -> String {
            address.contains("://") ? address : proxy.spec.transport.prefix + address
        }
        let listen = update.listen.flatMap { proxy.isBound(to: $0) ? nil : $0 } ?? proxy.spec.listenText
        let merged = ProxyBody(
            name: name,
            listen: keepingTransport(listen),
            upstream: keepingTransport(update.upstream ?? proxy.spec.upstreamText),
            enabled: update.enabled ?? proxy.enabled,
            tls: update.tls
        )
        var spec: ProxySpec
        switch Self.spec(merged) {
        case .success(let parsed): spec = parsed
        case .failure(let error): return error.response
        }
        // An update without `tls` keeps the proxy's; `"tls": false` ends it.
        if update.tls == nil { spec.tls = proxy.spec.tls }
        let enabled = merged.enabled ?? true
        if spec != proxy.spec {
            await close(proxy)
            switch await open(spec, enabled: enabled, toxics: proxy.toxics) {
            case .success(let opened): return .json(view(opened))
            case .failure(let error):
                state.withLock { state in
                    state.proxies.removeValue(forKey: name)
                    state.order.removeAll { $0 == name }
                }
                return error.response
            }
        }
        if enabled != proxy.enabled {
            if enabled { await proxy.server.endRefusing() } else { await proxy.server.disable() }
            state.withLock { $0.proxies[name]?.enabled = enabled }
        }
        return showProxy(name)
    }

    /// Stops a proxy (its connections reset) and ends its toxics' marks.
    func close(_ proxy: Managed) async {
        for toxic in proxy.toxics { record(.faultEnded(toxic.mark)) }
        await proxy.server.stop()
    }

    /// `DELETE /proxies/{name}`: 204.
    func deleteProxy(_ name: String) async -> APIResponse {
        let removed = state.withLock { state -> Managed? in
            state.order.removeAll { $0 == name }
            return state.proxies.removeValue(forKey: name)
        }
        guard let removed else { return Self.proxyNotFound }
        await close(removed)
        return .noContent
    }

    /// `POST /reset`: every proxy enabled, every toxic removed; 204.
    func reset() async -> APIResponse {
        let proxies = state.withLock { state in state.order.compactMap { state.proxies[$0] } }
        for proxy in proxies {
            for toxic in proxy.toxics { await removeToxic(toxic, from: proxy.server) }
            if !proxy.enabled { await proxy.server.endRefusing() }
            state.withLock { state in
                state.proxies[proxy.spec.name]?.toxics = []
                state.proxies[proxy.spec.name]?.enabled = true
            }
        }
        return .noContent
    }

    struct Populated: Encodable { var proxies: [ProxyView] }

    /// `POST /populate` with a list of proxies: each is created, or kept when one of that name has the same
    /// `listen` and `upstream` (else replaced); 201 with them all. Every entry is checked before any is made.
    func populate(_ body: String) async -> APIResponse {
        let bodies: [ProxyBody]
        switch decode([ProxyBody].self, from: body) {
        case .success(let decoded): bodies = decoded
        case .failure(let error): return error.response
        }
        var specs: [(ProxySpec, Bool)] = []
        for (index, body) in bodies.enumerated() {
            switch Self.spec(body, at: index) {
            case .success(let spec): specs.append((spec, body.enabled ?? true))
            case .failure(let error): return error.response
            }
        }
        var views: [ProxyView] = []
        for (spec, enabled) in specs {
            if let existing = state.withLock({ $0.proxies[spec.name] }) {
                if existing.spec.upstream == spec.upstream, existing.spec.tls == spec.tls, existing.spec.transport == spec.transport,
                    existing.spec.listen == spec.listen || existing.isBound(to: "\(spec.listen)")
                {
                    let update = await updateProxy(spec.name, body: enabled ? #"{"enabled":true}"# : #"{"enabled":false}"#)
                    guard update.status == .ok else { return update }
                    if let proxy = state.withLock({ $0.proxies[spec.name] }) { views.append(view(proxy)) }
                    continue
                }
                await close(existing)
            }
            switch await open(spec, enabled: enabled, toxics: []) {
            case .success(let proxy): views.append(view(proxy))
            case .failure(let error): return error.response
            }
        }
        return .json(Populated(proxies: views), status: .created)
    }
}

extension ControlAPI.Managed {
    /// Whether `listen` names the address this proxy is bound to (as `GET /proxies` shows it, `udp://` before a UDP
    /// proxy's).
    func isBound(to listen: String) -> Bool {
        guard let bound = server.boundAddress, let parts = Transport.split(listen), parts.transport == spec.transport || !listen.contains("://"),
            let asked = HostPort(parsing: parts.address)
        else { return false }
        return asked.port == bound.port && "\(asked)" == bound.hostPort
    }
}
