import ArgumentParser

/// Placeholder for `chaos run`.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "run", abstract: "Not built yet.")
    func run() async throws { throw ValidationError("not built yet") }
}
