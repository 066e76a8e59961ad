import Dispatch
import Foundation
import Synchronization

/// Turns the first SIGINT or SIGTERM into the end of a wait, so a run stops cleanly: faults lifted,
/// pair stopped, report written. A second signal is left to its default action (exit at once).
final class SignalWatcher: Sendable {
    private let sources: Mutex<[any DispatchSourceSignal]>
    private let stream: AsyncStream<Int32>
    private let continuation: AsyncStream<Int32>.Continuation
    private let signalled = Flag()

    /// Whether a signal has arrived (for loops that cannot wait on ``next()``).
    var received: Bool { signalled.value.load(ordering: .relaxed) }

    private final class Flag: Sendable {
        let value = Atomic<Bool>(false)
    }

    init(signals: [Int32] = [SIGINT, SIGTERM]) {
        (stream, continuation) = AsyncStream.makeStream(of: Int32.self, bufferingPolicy: .bufferingNewest(1))
        let continuation = self.continuation
        let flag = signalled
        sources = Mutex(signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                flag.value.store(true, ordering: .relaxed)
                continuation.yield(number)
                signal(number, SIG_DFL)
            }
            source.resume()
            return source
        })
    }

    /// Waits for the first signal; returns its number.
    func next() async -> Int32? {
        for await number in stream { return number }
        return nil
    }

    /// Stops watching and restores the default actions.
    func cancel() {
        sources.withLock { sources in for source in sources { source.cancel() } }
        continuation.finish()
    }
}
