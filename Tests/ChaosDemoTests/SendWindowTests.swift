import ChaosCore
import ChaosDemo
import Foundation
import Testing

/// `--send-for` and `--send-until`: when a side of the reference pair stops producing new messages.
@Suite("The pair's send window")
struct SendWindowTests {
    @Test("neither flag: open until stopped")
    func openWithoutFlags() {
        let window = SendWindow(sendFor: nil)
        #expect(window.timeLeft == nil && window.isOpen)
    }

    @Test("a moment already past closes the window at once; one ahead leaves it open until then")
    func untilAMoment() throws {
        let past = SendWindow(sendFor: nil, sendUntil: Date(timeIntervalSinceNow: -1))
        #expect(!past.isOpen && past.timeLeft == .nanoseconds(0))
        let ahead = SendWindow(sendFor: nil, sendUntil: Date(timeIntervalSinceNow: 3_600))
        let left = try #require(ahead.timeLeft)
        #expect(ahead.isOpen && left > .seconds(Int64(3_540)) && left <= .seconds(Int64(3_600)), "\(left)")
    }

    @Test("with both, whichever comes first ends it")
    func theEarlierEnds() throws {
        let momentFirst = SendWindow(sendFor: .seconds(Int64(3_600)), sendUntil: Date(timeIntervalSinceNow: 60))
        #expect(try #require(momentFirst.timeLeft) <= .seconds(Int64(60)))
        let lengthFirst = SendWindow(sendFor: .seconds(Int64(60)), sendUntil: Date(timeIntervalSinceNow: 3_600))
        #expect(try #require(lengthFirst.timeLeft) <= .seconds(Int64(60)))
        #expect(!SendWindow(sendFor: .seconds(Int64(3_600)), sendUntil: Date(timeIntervalSinceNow: -1)).isOpen)
    }
}
