import ArgumentParser
import ChaosCore
import ChaosRunner

/// How the proxy's relay threads wait for I/O, shared by `run`, `replay` and `proxy`.
struct RelayOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "How long a relay thread keeps polling for I/O after relaying bytes instead of sleeping (0 turns it off).",
        discussion: "Spares each hop a thread wake-up (tens of microseconds on a virtual machine); costs CPU only while traffic flows."))
    var busyPoll: String = "100us"

    func validate() throws {
        guard let window = ChaosDuration(parsing: busyPoll), window.nanoseconds <= 10_000_000 else {
            throw ValidationError("--busy-poll must be a duration up to 10ms, like 100us, or 0; found '\(busyPoll)'")
        }
    }

    /// Applies the options to `configuration`.
    func apply(to configuration: inout ScenarioRunner.Configuration) {
        configuration.busyPoll = ChaosDuration(parsing: busyPoll) ?? configuration.busyPoll
    }
}
