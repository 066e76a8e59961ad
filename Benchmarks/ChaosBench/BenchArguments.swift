/// The `--name value` options of one chaos-bench subcommand, read without a parser library
/// (the bench target depends on NIO only).
struct BenchArguments {
    private var values: [String: String] = [:]

    /// Reads `--name value` pairs; anything else is an error.
    init(_ arguments: some Sequence<String>) throws {
        var iterator = arguments.makeIterator()
        while let word = iterator.next() {
            guard word.hasPrefix("--"), word.count > 2 else { throw BenchError("unexpected argument '\(word)'") }
            guard let value = iterator.next() else { throw BenchError("\(word) needs a value") }
            values[String(word.dropFirst(2))] = value
        }
    }

    /// The text of option `name`, or `fallback` when absent.
    func string(_ name: String, default fallback: String) -> String { values[name] ?? fallback }

    /// The integer value of option `name`, or `fallback` when absent.
    func integer(_ name: String, default fallback: Int? = nil) throws -> Int {
        guard let text = values[name] else {
            guard let fallback else { throw BenchError("--\(name) is required") }
            return fallback
        }
        guard let value = Int(text), value >= 0 else { throw BenchError("--\(name) must be a non-negative integer, found '\(text)'") }
        return value
    }

    /// A TCP port from option `name` (required).
    func port(_ name: String = "port") throws -> UInt16 {
        let value = try integer(name)
        guard value > 0, value <= Int(UInt16.max) else { throw BenchError("--\(name) must be a TCP port, found \(value)") }
        return UInt16(value)
    }
}

/// A failure that ends a chaos-bench subcommand with a message and exit code 2.
struct BenchError: Error, CustomStringConvertible {
    /// What went wrong, for the user.
    let description: String
    init(_ description: String) { self.description = description }

    /// The message of any error, plain for a ``BenchError``.
    static func describe(_ error: any Error) -> String { (error as? BenchError)?.description ?? "\(error)" }
}
