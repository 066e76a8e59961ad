import ArgumentParser

/// Placeholder for `chaos replay`.
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "replay", abstract: "Not built yet.")
    func run() async throws { throw ValidationError("not built yet") }
}
