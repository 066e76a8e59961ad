import ChaosCore
package import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension RunReport {
    /// The report as JSON: sorted keys, snake_case names, pretty printed.
    package func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return try encoder.encode(self)
    }

    /// Reads a report from JSON; throws `ChaosError.badInput` naming `source` when it is not one.
    package static func decode(_ data: Data, source: String) throws -> RunReport {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let report: RunReport
        do {
            report = try decoder.decode(RunReport.self, from: data)
        } catch let DecodingError.keyNotFound(key, context) {
            throw ChaosError.badInput("\(source) is not a chaos report: field '\(Self.path(context.codingPath + [key]))' is missing")
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            throw ChaosError.badInput("\(source) is not a chaos report: field '\(Self.path(context.codingPath))' has the wrong type")
        } catch {
            throw ChaosError.badInput("\(source) is not a chaos report: it is not valid JSON")
        }
        guard report.schema.hasPrefix("chaos.report/") else {
            throw ChaosError.badInput("\(source) has schema '\(report.schema)', expected \(schemaVersion)")
        }
        return report
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
    }

    /// Reads `directory/report.json`; a missing or garbled file is `ChaosError.badInput`.
    package static func load(fromDirectory directory: String) throws -> RunReport {
        let path = (directory as NSString).appendingPathComponent("report.json")
        guard FileManager.default.fileExists(atPath: path) else {
            throw ChaosError.badInput("no report.json in \(directory): expected the folder of a chaos run (Reports/<scenario>-<time>/)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ChaosError.badInput("cannot read \(path)")
        }
        return try decode(data, source: path)
    }

    /// Writes report.json, report.md, junit.xml and report.html into `directory` (created when missing), each
    /// atomically (a temporary file renamed over the old one), so a reader never sees half a file.
    package func write(toDirectory directory: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw ChaosError(.io, "cannot create the report folder \(directory)", cause: error)
        }
        try Self.writeAtomically(jsonData(), to: directory, name: "report.json")
        try Self.writeAtomically(Data(MarkdownRenderer(flavor: .plain, runFolder: directory).render(self).utf8), to: directory, name: "report.md")
        try Self.writeAtomically(Data(JUnitRenderer().render(self).utf8), to: directory, name: "junit.xml")
        try Self.writeAtomically(Data(HTMLRenderer().render(self).utf8), to: directory, name: "report.html")
    }

    /// Writes only report.json atomically (the minute checkpoint).
    package func writeCheckpoint(toDirectory directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Self.writeAtomically(jsonData(), to: directory, name: "report.json")
    }

    static func writeAtomically(_ data: Data, to directory: String, name: String) throws {
        let final = (directory as NSString).appendingPathComponent(name)
        let temporary = (directory as NSString).appendingPathComponent(".\(name).\(getpid()).tmp")
        do {
            try data.write(to: URL(fileURLWithPath: temporary))
        } catch {
            throw ChaosError(.io, "cannot write \(temporary)", cause: error)
        }
        guard rename(temporary, final) == 0 else {
            let code = errno
            unlink(temporary)
            throw ChaosError(.io, "cannot rename \(temporary) to \(final): errno \(code)")
        }
    }
}
