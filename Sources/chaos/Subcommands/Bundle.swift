import ArgumentParser
import ChaosCore
import ChaosRunner
import Foundation

/// `chaos bundle DIR`: a run folder as one `.tar.gz` to hand over; `chaos replay` and `chaos shrink` take it as they
/// take the folder.
struct Bundle: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pack a run folder into one .tar.gz that chaos replay and chaos shrink take as they take the folder.",
        discussion: """
            The bundle holds scenario.json, timeline.json, the reports, the last 256 KiB of each of the pair's logs, \
            the capture's packets around the failures (with keys.log) when the run captured, the chaos version and a \
            README with the commands to replay and shrink it. Exit 2 when DIR is not a finished run folder.
            """
    )

    @Argument(help: "The run folder (it holds scenario.json, timeline.json and report.json).")
    var directory: String

    @Option(help: "The bundle to write (default: DIR.tar.gz beside the folder).")
    var out: String?

    func validate() throws {
        if let out, !(out.hasSuffix(".tar.gz") || out.hasSuffix(".tgz")) {
            throw ValidationError("--out must name a .tar.gz (or .tgz) file, found '\(out)'")
        }
    }

    func run() throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ChaosError.badInput("\(directory) is not a run folder: no such directory")
        }
        let folder = URL(fileURLWithPath: directory).standardizedFileURL
        let target = out ?? folder.path + ".tar.gz"
        let contents = try RunBundle.make(from: folder.path, to: target, version: Chaos.configuration.version)
        for line in contents { Console.line("  \(line)") }
        Console.line("bundle: \(target)")
        Console.line("        (chaos replay \(target) | chaos shrink \(target))")
    }
}
