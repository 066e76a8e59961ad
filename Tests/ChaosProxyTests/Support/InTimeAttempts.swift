import Testing

/// Runs `attempt` until one comes back with a result, at most `limit` times: an attempt that missed a fault's real-time
/// window (a grace, a linger), because a loaded machine held the test's thread past it, proves nothing and returns nil.
/// Records an issue, naming `window`, when every attempt missed it.
func firstAttemptInTime<T>(limit: Int = 5, window: String, _ attempt: () async throws -> T?) async throws -> T? {
    for _ in 0..<limit {
        if let result = try await attempt() { return result }
    }
    Issue.record("every one of \(limit) attempts missed \(window)")
    return nil
}
