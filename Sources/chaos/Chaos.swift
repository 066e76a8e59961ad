import ArgumentParser
import ChaosCore
import ChaosProxy
import Foundation
import Logging

/// The `chaos` command: a network chaos test harness for real-time client/server pairs.
@main
struct Chaos: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chaos",
        abstract: "A TCP chaos proxy that injects mobile-network faults and audits message delivery.",
        version: "0.1.0",
        subcommands: [Run.self, Validate.self, Proxy.self, Audit.self, Report.self, Replay.self, Shrink.self, Bundle.self, Demo.self, CA.self]
    )

    /// Runs the chosen subcommand; maps ``ChaosError`` to exit codes (bad input 2, other failures 1).
    static func main() async {
        FreedMemory.keepForReuse()
        let level = ProcessInfo.processInfo.environment["CHAOS_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as ChaosError {
            FileHandle.standardError.write(Data("chaos: \(error)\n".utf8))
            Foundation.exit(error.code == .badInput || error.code == .pair ? 2 : 1)
        } catch {
            // Argument-parser errors (bad flags) exit with 2 as well, through its own formatting.
            let code = exitCode(for: error)
            if code == .validationFailure || code.rawValue == 64 {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}
