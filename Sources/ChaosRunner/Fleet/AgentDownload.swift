import ChaosCore
import Foundation

/// `chaos report --merge http://AGENT:PORT`: copies a held agent's run (`chaos run --agent NAME --hold`) into a local
/// folder through its control API: scenario.json and timeline.json, the events.bin ring page by page
/// (`GET /events?since=`), and the final report.json. The copy is byte for byte, so the merge reads it as it reads any
/// agent's folder; beside it, `clock-offset.json`: the agent's clock offset, measured (``MeasuredClockOffset``).
package enum AgentDownload {
    /// Fetches the agent at `url` into `folder` (created). Waits, at most `wait` seconds, for an agent still running.
    package static func fetch(url: String, token: String?, into folder: String, wait: Double = 600) throws {
        let agent = try AgentHTTP(url: url, token: token)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for name in ["scenario.json", "timeline.json"] {
            try Data(try file(name, from: agent)).write(to: URL(fileURLWithPath: folder).appendingPathComponent(name))
        }
        try MeasuredClockOffset.measure(agent).write(into: folder)
        let deadline = Date().addingTimeInterval(wait)
        var cursor = try firstCursor(agent)
        var handles: [Int: FileHandle] = [:]
        defer { for handle in handles.values { try? handle.close() } }
        while true {
            let answer = try pageAfterRestart(agent, "/events?since=\(cursor)")
            guard answer.status == 200 else { throw refusal(answer, agent: agent, path: "/events?since=\(cursor)") }
            let segment = Int(answer.headers["x-chaos-segment"] ?? "") ?? -1
            guard segment >= 0, let next = answer.headers["x-chaos-next"] else {
                throw ChaosError.badInput("agent URL \(url): /events answered without its X-Chaos-Segment and X-Chaos-Next headers")
            }
            if !answer.body.isEmpty {
                if handles[segment] == nil {
                    let path = EventFileWriter.path(folder: folder, segment: segment)
                    guard FileManager.default.createFile(atPath: path, contents: nil),
                        let handle = FileHandle(forWritingAtPath: path)
                    else {
                        throw ChaosError(.io, "agent URL \(url): cannot write its events to \(path)")
                    }
                    handles[segment] = handle
                }
                try handles[segment]?.write(contentsOf: answer.body)
            }
            if answer.headers["x-chaos-end"] == "true" { break }
            if next == cursor {
                guard Date() < deadline else {
                    throw ChaosError.badInput(
                        "agent URL \(url): still running after \(Int(wait)) s of waiting for its last events "
                            + "(merge once its run is over; a held agent, chaos run --agent NAME --hold, keeps them served)"
                    )
                }
                Thread.sleep(forTimeInterval: 1)
            }
            cursor = next
        }
        try Data(try file("report.json", from: agent)).write(to: URL(fileURLWithPath: folder).appendingPathComponent("report.json"))
    }

    /// How long an agent that answered before may refuse connections: between its run and `--hold` its API closes
    /// and opens again.
    static let restartWait: Double = 30

    /// GETs `path` from an agent that has answered before, trying again while it refuses connections or closes them
    /// unanswered (a connection the kernel queued for the run's API as it closed is reset), at most ``restartWait``.
    static func pageAfterRestart(_ agent: AgentHTTP, _ path: String) throws -> AgentHTTP.Answer {
        let deadline = Date().addingTimeInterval(restartWait)
        while true {
            do {
                return try agent.get(path)
            } catch let error as ChaosError
                where error.message.contains("cannot connect") || error.message.contains(AgentHTTP.closedUnanswered)
            {
                guard Date() < deadline else { throw error }
                Thread.sleep(forTimeInterval: 0.5)
            }
        }
    }

    /// The cursor of the oldest segment the agent still holds (its ring may have removed the first ones).
    static func firstCursor(_ agent: AgentHTTP) throws -> String {
        for segment in 0..<4_096 {
            let answer = try agent.get("/events?since=\(segment):0&limit=65536")
            if answer.status == 200 { return "\(segment):0" }
            if answer.status != 410 { throw refusal(answer, agent: agent, path: "/events?since=\(segment):0") }
        }
        throw ChaosError.badInput("agent URL \(agent.url): no event segment in its first 4096")
    }

    static func file(_ name: String, from agent: AgentHTTP) throws -> [UInt8] {
        let answer = name == "report.json" ? try pageAfterRestart(agent, "/run/\(name)") : try agent.get("/run/\(name)")
        guard answer.status == 200 else { throw refusal(answer, agent: agent, path: "/run/\(name)") }
        return answer.body
    }

    /// A non-200 answer as bad input naming the agent.
    static func refusal(_ answer: AgentHTTP.Answer, agent: AgentHTTP, path: String) -> ChaosError {
        let detail =
            (try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["error"] as? String
            ?? String(decoding: answer.body.prefix(200), as: UTF8.self)
        let hint = answer.status == 401 ? " (give --api-token-file with the agents' token)" : ""
        return ChaosError.badInput("agent URL \(agent.url): GET \(path) answered \(answer.status): \(detail)\(hint)")
    }
}
