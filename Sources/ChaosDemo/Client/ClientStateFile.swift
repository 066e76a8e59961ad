import ChaosCore
import Foundation

/// What a resilient client persists so that a killed-and-restarted client resumes where it was:
/// the last downstream seq it processed (its resume `ack`) and the last upstream seq it assigned
/// (so that it keeps numbering instead of reusing seqs the server already processed).
package struct ClientState: Codable, Hashable, Sendable {
    /// The stream the state belongs to.
    package var stream: String
    /// Last downstream seq processed.
    package var lastProcessedDown: Int
    /// Last upstream seq assigned.
    package var lastAssignedUp: Int

    /// A state snapshot.
    package init(stream: String, lastProcessedDown: Int, lastAssignedUp: Int) {
        self.stream = stream
        self.lastProcessedDown = lastProcessedDown
        self.lastAssignedUp = lastAssignedUp
    }
}

/// Reads and atomically replaces the client state file (write a temporary file, then rename).
struct ClientStateFile: Sendable {
    /// Where the state lives.
    let path: String

    /// The stored state, nil when the file does not exist yet; a corrupt file is bad input.
    func load() throws -> ClientState? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ChaosError(.io, "cannot read state file '\(path)'")
        }
        do {
            return try JSONDecoder().decode(ClientState.self, from: data)
        } catch {
            throw ChaosError.badInput("state file '\(path)' is not a chaos demo client state (\(error))")
        }
    }

    /// The stored state of `stream`; a file that belongs to another stream is bad input.
    func load(stream: String) throws -> ClientState? {
        let restored = try load()
        if let restored, restored.stream != stream {
            throw ChaosError.badInput("state file '\(path)' belongs to stream '\(restored.stream)', not '\(stream)'")
        }
        return restored
    }

    /// Replaces the stored state atomically.
    func save(_ state: ClientState) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        do {
            try encoder.encode(state).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw ChaosError(.io, "cannot write state file '\(path)'", cause: error)
        }
    }
}
