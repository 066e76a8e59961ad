import ChaosAudit
import ChaosCapture
import ChaosControl
import ChaosProxy
import ServiceLifecycle

/// Four times a second: the progress line when it is due, the capture ring frozen at the first loss, and
/// report.json checkpointed every `every` (so a killed soak still leaves a report).
struct CheckpointService: Service {
    let clock: RunClock
    let every: Int64
    let progress: ProgressReporter
    let sink: RunSink
    let injector: FaultInjector
    let capture: CaptureWriter?
    /// Writes a checkpoint of the report at that run time; nil without a run folder.
    let checkpoint: (@Sendable (Int64) -> Void)?

    func run() async throws {
        var lastCheckpoint = clock.now()
        var lastProgress = clock.now()
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(nanoseconds: 250_000_000) }
            let now = clock.now()
            if Double(now - lastProgress) / 1e9 >= progress.interval {
                lastProgress = now
                let totals = sink.totals()
                progress.update(progress.line(elapsed: now, faults: injector.appliedSoFar.count, totals: totals))
                // Keep the capture ring around the first loss: later traffic must not push it out.
                if let capture, let totals, totals.lost > 0 || totals.gaps > 0 { capture.freeze() }
            }
            if let checkpoint, now - lastCheckpoint >= every {
                lastCheckpoint = now
                checkpoint(now)
                // Building and encoding a report churns the heap; hand the freed pages back so that a
                // 72-hour soak's RSS shows what it holds, not what malloc kept from checkpoints.
                ReleaseFreedMemory.now()
            }
        }
        progress.finish()
    }
}
