/// Runs `body` to its end even when the calling task is cancelled (a service the group cancels must still
/// stop what it started: a stop that sleeps between checks would otherwise spin or skip its grace time).
func uncancelled(_ body: @escaping @Sendable () async -> Void) async {
    await Task { await body() }.value
}
