/// The one error type of chaos. Every failure a user can cause (a bad scenario, a bad flag, an
/// unreadable capture) is a `ChaosError` with a ``Code``, a message that says what was expected and,
/// for files, where: `file:line:column`.
///
/// Exit codes are chosen by the executable only: ``Code-swift.struct/badInput`` maps to 2.
package struct ChaosError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String, Sendable {
            case badInput = "bad input"
            case io = "i/o"
            case network = "network"
            case pair = "pair"
            case internalError = "internal"
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The user gave something that cannot be used: a scenario, a flag, a capture, an API request.
        package static let badInput = Code(.badInput)
        /// A file could not be read or written.
        package static let io = Code(.io)
        /// A socket could not be bound or connected.
        package static let network = Code(.network)
        /// The client/server pair under test could not be started or failed.
        package static let pair = Code(.pair)
        /// A bug in chaos itself.
        package static let internalError = Code(.internalError)

        package var description: String { value.rawValue }
    }

    /// Where in a file a problem is.
    package struct Location: Hashable, Sendable, CustomStringConvertible {
        /// The file as the user named it.
        package var file: String
        /// 1-based line.
        package var line: Int
        /// 1-based column.
        package var column: Int

        /// A location in `file` at `line`:`column` (both 1-based).
        package init(file: String, line: Int, column: Int) {
            self.file = file
            self.line = line
            self.column = column
        }

        package var description: String { "\(file):\(line):\(column)" }
    }

    /// What kind of failure this is.
    package var code: Code
    /// What went wrong and what was expected instead.
    package var message: String
    /// Where, for errors in a file.
    package var location: Location?
    /// The underlying error, when there is one.
    package var cause: (any Error & Sendable)?

    /// Creates an error.
    package init(_ code: Code, _ message: String, at location: Location? = nil, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.location = location
        self.cause = cause
    }

    /// A bad-input error (exit code 2).
    package static func badInput(_ message: String, at location: Location? = nil) -> ChaosError {
        ChaosError(.badInput, message, at: location)
    }

    package var description: String {
        var text = location.map { "\($0): error: \(message)" } ?? "error: \(message)"
        if let cause { text += " (\(cause))" }
        return text
    }
}
