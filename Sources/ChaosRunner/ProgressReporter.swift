import ChaosAudit
import ChaosCore
import Foundation

/// Live progress for long runs: a line redrawn every second on a terminal, a plain status line
/// every minute otherwise (CI logs).
struct ProgressReporter: Sendable {
    let planned: ChaosDuration
    let isTerminal: Bool
    let output: @Sendable (String) -> Void

    init(planned: ChaosDuration, output: @escaping @Sendable (String) -> Void) {
        self.planned = planned
        self.isTerminal = isatty(STDOUT_FILENO) == 1
        self.output = output
    }

    /// Seconds between two updates.
    var interval: Double { isTerminal ? 1 : 60 }

    func line(elapsed: Int64, faults: Int, totals: DeliveryCounts?) -> String {
        var text =
            "\(Timeline.clock(.nanoseconds(elapsed))) / \(Timeline.clock(planned))"
            + "  faults \(faults)"
        if let totals {
            text += "  messages \(totals.delivered) delivered  lost so far \(totals.lost)"
        }
        return text
    }

    func update(_ text: String) {
        if isTerminal {
            FileHandle.standardOutput.write(Data(("\r\u{1B}[2K" + text).utf8))
        } else {
            output("status: " + text)
        }
    }

    /// Ends the redrawn line so the next output starts clean.
    func finish() {
        if isTerminal { FileHandle.standardOutput.write(Data("\r\u{1B}[2K".utf8)) }
    }
}
