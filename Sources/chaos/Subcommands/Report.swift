import ArgumentParser

/// Placeholder for `chaos report`; replaced by its work item.
struct Report: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "report", abstract: "Not built yet.")
    func run() async throws { throw ValidationError("chaos report is not built yet") }
}
