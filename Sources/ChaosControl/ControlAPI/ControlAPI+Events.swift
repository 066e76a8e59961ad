import ChaosCore
import Foundation
import NIOHTTP1

/// A fleet agent's routes: its traffic events and run files, for `chaos report --merge URL` (``FleetMerge``), and
/// `GET /clock` (`{"wall_ns": N}`: now on the agent's clock, ``AgentClock``), from which the merge measures the
/// offset between the agent's host clock and its own.
extension ControlAPI {
    /// `GET /events?since=SEGMENT:OFFSET[&limit=BYTES]`: a page of the event ring (``EventFilePage``) as
    /// application/octet-stream, with `X-Chaos-Segment`, `X-Chaos-Next` (the next page's cursor) and `X-Chaos-End:
    /// true` once the page ends the agent's last segment. 404 when this is not an agent; 410 for a segment the ring
    /// removed; 400 for a malformed cursor.
    func events(query: String) -> APIResponse {
        guard let folder = extras.agentFolder else {
            return .error("no events: this is not a fleet agent (chaos run --agent NAME)", status: .notFound)
        }
        var since = "0:0"
        var limit = 8 << 20
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
            guard parts.count == 2 else { continue }
            if parts[0] == "since" { since = parts[1] }
            if parts[0] == "limit", let value = Int(parts[1]) { limit = min(max(value, 1 << 16), 64 << 20) }
        }
        let finished = extras.agentFinished?() ?? false
        do {
            let page = try EventFilePage.read(folder: folder, cursor: since, limit: limit)
            let last =
                page.segmentEnded && finished
                && !FileManager.default.fileExists(atPath: EventFileWriter.path(folder: folder, segment: page.segment + 1))
            var response = APIResponse(status: .ok, body: "", bytes: page.bytes, contentType: "application/octet-stream")
            response.extraHeaders = [
                ("X-Chaos-Segment", "\(page.segment)"), ("X-Chaos-Next", page.next),
                ("X-Chaos-End", last ? "true" : "false"),
            ]
            return response
        } catch let error as ChaosError {
            let gone = error.message.contains("not here") && Self.segmentRemoved(since, folder: folder)
            return .error(error.message, status: gone ? .gone : error.message.contains("since must") ? .badRequest : .notFound)
        } catch {
            return .error("\(error)", status: .internalServerError)
        }
    }

    /// Whether the cursor's segment is older than the oldest the ring still holds.
    private static func segmentRemoved(_ cursor: String, folder: String) -> Bool {
        guard let segment = cursor.split(separator: ":").first.flatMap({ Int($0) }) else { return false }
        return (segment + 1...segment + 64).contains { FileManager.default.fileExists(atPath: EventFileWriter.path(folder: folder, segment: $0)) }
    }

    /// `GET /run/scenario.json|timeline.json|report.json`: the agent's run files (report.json once the run is over).
    func runFile(_ name: String) -> APIResponse {
        guard let folder = extras.agentFolder else {
            return .error("no run files: this is not a fleet agent (chaos run --agent NAME)", status: .notFound)
        }
        guard ["scenario.json", "timeline.json", "report.json"].contains(name) else {
            return .error("GET /run/ serves scenario.json, timeline.json and report.json, not '\(name)'", status: .notFound)
        }
        if name == "report.json", extras.agentFinished?() != true {
            return .error("the run is not over: its final report.json is not written yet", status: .notFound)
        }
        guard let data = FileManager.default.contents(atPath: (folder as NSString).appendingPathComponent(name)) else {
            return .error("\(name) is not in the run folder", status: .notFound)
        }
        return APIResponse(status: .ok, body: String(decoding: data, as: UTF8.self))
    }
}
