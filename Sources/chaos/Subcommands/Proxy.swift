import ArgumentParser

/// Placeholder for `chaos proxy`.
struct Proxy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "proxy", abstract: "Not built yet.")
    func run() async throws { throw ValidationError("not built yet") }
}
