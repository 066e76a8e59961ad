import Testing

@testable import ChaosCore

@Suite("Durations, ranges and rates")
struct DurationTests {
    @Test(
        "durations parse in every unit",
        arguments: [
            ("250ms", Int64(250_000_000)), ("5s", 5_000_000_000), ("1.5s", 1_500_000_000), ("2m", 120_000_000_000),
            ("72h", 259_200_000_000_000), ("100us", 100_000), ("0", 0), (" 3s ", 3_000_000_000), ("1d", 86_400_000_000_000),
        ]
    )
    func parses(text: String, nanoseconds: Int64) {
        #expect(ChaosDuration(parsing: text)?.nanoseconds == nanoseconds)
    }

    @Test("malformed durations are refused", arguments: ["", "5", "s", "5 s", "5sec", "1..2s", "-5s", "1e3s", "5.5.5s", "∞s"])
    func refuses(text: String) {
        #expect(ChaosDuration(parsing: text) == nil)
    }

    @Test(
        "durations print in their shortest exact form",
        arguments: [
            ("250ms", "250ms"), ("90s", "90s"), ("120s", "2m"), ("72h", "72h"), ("1.5s", "1.5s"), ("1500us", "1.5ms"),
        ]
    )
    func prints(text: String, printed: String) {
        #expect(ChaosDuration(parsing: text)?.description == printed)
    }

    @Test("ranges parse, and an inverted range is an error")
    func ranges() throws {
        #expect(try DurationRange.parse("5s..30s").get() == DurationRange(.seconds(Int64(5)), .seconds(Int64(30))))
        #expect(try DurationRange.parse("5s").get() == DurationRange(exactly: .seconds(Int64(5))))
        #expect(throws: DurationRange.ParseProblem.inverted) { try DurationRange.parse("30s..5s").get() }
        #expect(throws: DurationRange.ParseProblem.badDuration("x")) { try DurationRange.parse("5s..x").get() }
    }

    @Test(
        "rates parse in bytes and bits",
        arguments: [
            ("1MB/s", Int64(1_000_000)), ("500KB", 500_000), ("10mbit", 1_250_000), ("256kbps", 32_000), ("1MiB/s", 1_048_576),
        ]
    )
    func rates(text: String, bytes: Int64) {
        #expect(ByteRate(parsing: text)?.bytesPerSecond == bytes)
    }
}
