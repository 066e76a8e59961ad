import ChaosCore
import ChaosProxy
import Foundation
import NIOHTTP1
import Synchronization

/// One answer of the control API.
struct APIResponse: Sendable {
    var status: HTTPResponseStatus
    /// JSON (or text for `/metrics`); empty for 204.
    var body: String
    /// Bytes to send instead of `body` (`/events` pages).
    var bytes: [UInt8]?
    var contentType = "application/json"
    /// More response headers (`WWW-Authenticate` on a 401).
    var extraHeaders: [(String, String)] = []

    /// Toxiproxy's 204 No Content.
    static let noContent = APIResponse(status: .noContent, body: "")

    /// `value` as JSON (keys sorted, slashes unescaped), with a final newline.
    static func json(_ value: some Encodable, status: HTTPResponseStatus = .ok) -> APIResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value) else {
            return APIResponse(status: .internalServerError, body: #"{"error":"cannot encode the answer","status":500}"# + "\n")
        }
        return APIResponse(status: status, body: String(decoding: data, as: UTF8.self) + "\n")
    }

    /// Toxiproxy's error body, `{"error": "…", "status": N}`; a message quoting a huge request is cut.
    static func error(_ message: String, status: HTTPResponseStatus) -> APIResponse {
        let text = message.count > 500 ? String(message.prefix(500)) + "… (cut)" : message
        return json(APIError(error: text, status: Int(status.code)), status: status)
    }
}

/// Toxiproxy's error body.
struct APIError: Codable, Sendable {
    var error: String
    var status: Int
}

extension ControlAPI {
    /// Answers one request: one that changes something after every such request before it; a read (GET: proxies,
    /// toxics, `/metrics`, `/report`) at once, from the state as it is.
    func handle(method: HTTPMethod, path: String, query: String = "", body: String) async -> APIResponse {
        if method == .GET { return await route(method: method, path: path, query: query, body: body) }
        return await serialized { [self] in await route(method: method, path: path, query: query, body: body) }
    }

    /// The one router of both kinds of route: Toxiproxy's and chaos's own.
    private func route(method: HTTPMethod, path: String, query: String, body: String) async -> APIResponse {
        let parts = path.split(separator: "/").map { $0.removingPercentEncoding ?? String($0) }
        let at = { (index: Int) in index < parts.count ? parts[index] : "" }
        let write = method == .POST || method == .PATCH
        switch (method, parts.count, at(0), at(2)) {
        case (.GET, 1, "version", _): return .json(["version": Self.version])
        case (.GET, 1, "metrics", _): return metrics()
        case (.GET, 1, "report", _):
            guard let report = extras.report else {
                return .error(
                    "no live audit: start chaos proxy with --protocol-from SCENARIO or the protocol flags",
                    status: .notFound
                )
            }
            return APIResponse(status: .ok, body: report())
        case (.GET, 1, "events", _): return events(query: query)
        case (.GET, 1, "clock", _): return .json(["wall_ns": AgentClock.now()])
        case (.GET, 2, "run", _): return runFile(at(1))
        case (.GET, 1, "ui", _): return LivePage.response
        case (.GET, 2, "ui", _) where at(1) == "state": return liveState()
        case (.GET, 2, "ui", _) where at(1) == "streams": return liveStreams(query: query)
        case (.POST, 2, "schedule", _) where at(1) == "pause" || at(1) == "resume": return schedule(pause: at(1) == "pause")
        case (.POST, 1, "stop", _): return await stopRun()
        case (.POST, 1, "reset", _): return await reset()
        case (.POST, 1, "populate", _): return await populate(body)
        case (.GET, 1, "proxies", _): return .json(proxyViews())
        case (.POST, 1, "proxies", _): return await createProxy(body)
        case (.GET, 2, "proxies", _): return showProxy(at(1))
        case (_, 2, "proxies", _) where write: return await updateProxy(at(1), body: body)
        case (.DELETE, 2, "proxies", _): return await deleteProxy(at(1))
        case (.GET, 3, "proxies", "toxics"): return toxics(of: at(1))
        case (.POST, 3, "proxies", "toxics"): return await createToxic(on: at(1), body: body)
        case (.GET, 4, "proxies", "toxics"): return showToxic(at(3), on: at(1))
        case (_, 4, "proxies", "toxics") where write: return await updateToxic(at(3), on: at(1), body: body)
        case (.DELETE, 4, "proxies", "toxics"): return await deleteToxic(at(3), on: at(1))
        case (.GET, 1, "faults", _): return listFaults()
        case (.POST, 1, "faults", _): return await addFault(body)
        case (.DELETE, 1, "faults", _): return await liftFaults(nil)
        case (.DELETE, 2, "faults", _):
            guard let id = Int(at(1)) else { return .error("fault id must be a number, found '\(at(1))'", status: .badRequest) }
            return await liftFaults(id)
        default:
            return .error(
                "no route \(method) \(path); routes: GET /version, GET /metrics, GET /report, GET /events?since=S:O, GET /clock, "
                    + "GET /run/scenario.json|timeline.json|report.json, GET /ui, GET /ui/state, GET /ui/streams, GET /ui/events, "
                    + "POST /schedule/pause|resume, POST /stop, POST /reset, POST /populate, "
                    + "GET|POST /proxies, GET|POST|DELETE /proxies/NAME, GET|POST /proxies/NAME/toxics, "
                    + "GET|POST|DELETE /proxies/NAME/toxics/TOXIC, GET|POST|DELETE /faults, DELETE /faults/ID",
                status: .notFound
            )
        }
    }

    /// A request body decoded as `T`, or Toxiproxy's 400 `bad request body: …`.
    func decode<T: Decodable>(_ type: T.Type, from body: String) -> Result<T, APIResponseError> {
        do {
            return .success(try JSONDecoder().decode(T.self, from: Data(body.utf8)))
        } catch let error as DecodingError {
            return .failure(APIResponseError(.error("bad request body: \(error.summary)", status: .badRequest)))
        } catch {
            return .failure(APIResponseError(.error("bad request body: \(error)", status: .badRequest)))
        }
    }
}

/// An error answer, thrown through the steps of a request.
struct APIResponseError: Error {
    var response: APIResponse
    init(_ response: APIResponse) { self.response = response }
}

extension DecodingError {
    /// What is wrong and where, in one line.
    var summary: String {
        func path(_ context: Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return keys.isEmpty ? "" : " at \(keys.joined(separator: "."))"
        }
        switch self {
        case .typeMismatch(let type, let context): return "expected \(type)\(path(context))"
        case .valueNotFound(let type, let context): return "expected \(type)\(path(context)), found null"
        case .keyNotFound(let key, let context): return "missing '\(key.stringValue)'\(path(context))"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not valid JSON" : "invalid value\(path(context))"
        @unknown default: return "\(self)"
        }
    }
}
