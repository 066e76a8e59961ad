import ArgumentParser
import ChaosCore
import ChaosRunner

/// How the proxy's relay threads wait for I/O, shared by `run`, `replay` and `proxy`.
struct RelayOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "How long a relay thread keeps polling for I/O after relaying bytes instead of sleeping (0 turns it off).",
            discussion: "Spares each hop a thread wake-up (tens of microseconds on a virtual machine); costs CPU only while traffic flows."
        )
    )
    var busyPoll: String = "100us"

    @Flag(
        inversion: .prefixedNo,
        help: ArgumentHelp(
            "Relay connections that no fault or link profile touches on plain epoll threads (--no-epoll-relay: NIO relays all).",
            discussion:
                "A disconnect cuts such a connection where it is; a fault that shapes its bytes moves it to NIO first, bytes in flight included."
        )
    )
    var epollRelay = true

    func validate() throws {
        guard let window = ChaosDuration(parsing: busyPoll), window.nanoseconds <= 10_000_000 else {
            throw ValidationError("--busy-poll must be a duration up to 10ms, like 100us, or 0; found '\(busyPoll)'")
        }
    }

    /// Applies the options to `configuration`.
    func apply(to configuration: inout ScenarioRunner.Configuration) {
        configuration.busyPoll = ChaosDuration(parsing: busyPoll) ?? configuration.busyPoll
        configuration.epollRelay = epollRelay
    }
}
