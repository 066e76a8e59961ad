import ChaosCore
import Foundation

/// How far an agent's clock is ahead of the merging host's, measured as NTP does when `chaos report --merge URL`
/// fetches the agent: several `GET /clock` exchanges, each bracketed by the merging host's clock; the exchange with
/// the shortest round trip gives the offset (the agent's reading less the exchange's midpoint), which is then within
/// half that round trip of the truth (at the moment of the measurement: clocks drift apart over a long soak, so NTP on
/// every host still matters). Kept as `clock-offset.json` in the fetched agent's folder; the merge removes it from the
/// agent's timestamps unless `--clock-offset` names the agent.
struct MeasuredClockOffset: Codable, Equatable {
    /// Nanoseconds the agent's clock was ahead of the merging host's.
    var offsetNs: Int64
    /// Half the round trip of the best exchange: the bound on the measurement's error.
    var uncertaintyNs: Int64
    /// How many exchanges were made.
    var exchanges: Int
    /// When (RFC 3339, the merging host's clock).
    var measuredAt: String

    /// The file in a fetched agent's folder.
    static let fileName = "clock-offset.json"

    /// Measures `agent`'s offset over `exchanges` GETs of `/clock`.
    static func measure(_ agent: AgentHTTP, exchanges: Int = 8) throws -> MeasuredClockOffset {
        var best: (rtt: Int64, offset: Int64)?
        for _ in 0..<exchanges {
            let sent = AgentClock.hostNow()
            let answer = try agent.get("/clock", timeout: 10)
            let received = AgentClock.hostNow()
            guard answer.status == 200 else { throw AgentDownload.refusal(answer, agent: agent, path: "/clock") }
            guard let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
                let wall = (object["wall_ns"] as? NSNumber)?.int64Value
            else {
                throw ChaosError.badInput(
                    "agent URL \(agent.url): GET /clock answered no wall_ns: \(String(decoding: answer.body.prefix(200), as: UTF8.self))"
                )
            }
            let rtt = received - sent
            let offset = wall - (sent + rtt / 2)
            if best == nil || rtt < best!.rtt { best = (rtt, offset) }
        }
        let chosen = best ?? (0, 0)
        return MeasuredClockOffset(
            offsetNs: chosen.offset,
            uncertaintyNs: (chosen.rtt + 1) / 2,
            exchanges: exchanges,
            measuredAt: Date().ISO8601Format()
        )
    }

    /// Writes `clock-offset.json` into `folder`.
    func write(into folder: String) throws {
        try Self.coder.encoder.encode(self).write(to: URL(fileURLWithPath: folder).appendingPathComponent(Self.fileName))
    }

    /// The measurement kept in `folder`, nil when there is none (a folder the merge did not fetch); bad input naming
    /// the file when it is not one.
    static func load(folder: String) throws -> MeasuredClockOffset? {
        let path = (folder as NSString).appendingPathComponent(fileName)
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        do {
            let measured = try coder.decoder.decode(MeasuredClockOffset.self, from: data)
            guard measured.uncertaintyNs >= 0, measured.exchanges > 0 else {
                throw ChaosError.badInput("\(path): uncertainty_ns must be at least 0 and exchanges at least 1")
            }
            return measured
        } catch let error as ChaosError {
            throw error
        } catch {
            throw ChaosError.badInput("\(path): not a clock offset measurement (offset_ns, uncertainty_ns, exchanges, measured_at): \(error)")
        }
    }

    private static let coder: (encoder: JSONEncoder, decoder: JSONDecoder) = {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return (encoder, decoder)
    }()
}
