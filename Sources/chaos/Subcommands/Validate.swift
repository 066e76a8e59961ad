import ArgumentParser

/// Placeholder for `chaos validate`.
struct Validate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "validate", abstract: "Not built yet.")
    func run() async throws { throw ValidationError("not built yet") }
}
