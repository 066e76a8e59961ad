import ArgumentParser

/// Placeholder for `chaos demo`; replaced by its work item.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "demo", abstract: "Not built yet.")
    func run() async throws { throw ValidationError("chaos demo is not built yet") }
}
