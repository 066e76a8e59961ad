import ChaosCore
import Foundation
import NIOHTTP1

/// The live page's routes (``LivePage``): its figures, its streams page by page, and its controls. Each control is a
/// POST any client of the API may make too, under the same token rule, and is written down for the report
/// (``ManualActions``).
///
/// - `GET /ui/state`: the run so far as JSON (what `GET /ui/events` pushes every second).
/// - `GET /ui/streams?page=N&q=TEXT`: a page of the streams, worst first, whose names contain TEXT.
/// - `POST /schedule/pause`, `POST /schedule/resume`: no occurrence begins while paused; after it, each begins later
///   by the pause (409 when already so, or on a replay, which follows the pauses of the run it replays).
/// - `POST /stop`: the run stops as Ctrl-C stops it (202).
extension ControlAPI {
    /// The answer to a request for the live figures of an API that serves no run.
    static let noRun = "no run here: the live figures come from chaos run --metrics (or --ui) HOST:PORT"

    func liveState() -> APIResponse {
        guard let state = extras.liveState else { return .error(Self.noRun, status: .notFound) }
        return APIResponse(status: .ok, body: state())
    }

    func liveStreams(query: String) -> APIResponse {
        guard let streams = extras.liveStreams else { return .error(Self.noRun, status: .notFound) }
        var page = 0
        var search = ""
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            guard parts.count == 2 else { continue }
            if parts[0] == "page" {
                guard let number = Int(parts[1]), number >= 0 else {
                    return .error("page must be a number from 0, found '\(parts[1])'", status: .badRequest)
                }
                page = number
            }
            if parts[0] == "q" { search = String(parts[1].prefix(200)) }
        }
        return APIResponse(status: .ok, body: streams(page, search))
    }

    /// What a pause or a resume answers.
    struct ScheduleAnswer: Encodable {
        var paused: Bool
        /// When it was paused or resumed, in seconds on the timeline's clock.
        var atS: Double
        /// A resume: how long the pause lasted.
        var pausedForS: Double?

        enum CodingKeys: String, CodingKey {
            case paused
            case atS = "at_s"
            case pausedForS = "paused_for_s"
        }
    }

    func schedule(pause: Bool) -> APIResponse {
        guard let schedule = extras.schedule else { return .error("no fault schedule here: \(Self.noRun)", status: .notFound) }
        do throws(FaultSchedule.Refusal) {
            if pause {
                let at = try schedule.pause()
                extras.manual?.record(.pause)
                return .json(ScheduleAnswer(paused: true, atS: at.seconds))
            }
            let span = try schedule.resume()
            extras.manual?.record(.resume, "paused for \(span.lasts)")
            return .json(ScheduleAnswer(paused: false, atS: span.end.seconds, pausedForS: span.lasts.seconds))
        } catch {
            switch error {
            case .planned:
                return .error("this run replays the pauses of the run it replays (timeline.json): it is not paused by hand", status: .conflict)
            case .already(let paused):
                return .error(paused ? "the schedule is paused already" : "the schedule is not paused", status: .conflict)
            }
        }
    }

    func stopRun() async -> APIResponse {
        guard let stop = extras.stop else { return .error("nothing to stop: \(Self.noRun)", status: .notFound) }
        extras.manual?.record(.stop, "POST /stop")
        // The run stops after this answer has gone (the API is among what it stops).
        Task {
            try? await Task.sleep(nanoseconds: 100_000_000)
            await stop()
        }
        return .json(["stopping": true], status: .accepted)
    }
}
