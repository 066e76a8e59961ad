import ArgumentParser

/// Placeholder for `chaos audit`; replaced by its work item.
struct Audit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "audit", abstract: "Not built yet.")
    func run() async throws { throw ValidationError("chaos audit is not built yet") }
}
