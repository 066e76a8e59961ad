import Foundation

/// Writes whole lines to standard output at once (unbuffered), so progress and fault lines reach
/// a CI log as they happen even when stdout is a pipe or a file.
enum Console {
    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }
}
