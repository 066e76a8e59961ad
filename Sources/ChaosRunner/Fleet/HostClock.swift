import CChaosClock

/// What the kernel says of this host's clock discipline (NTP, through `adjtimex`): whether it is synchronised and
/// its estimated error. A fleet's merge shows them: they bound how far apart two agents' timestamps may be.
enum HostClock {
    /// The state now: `synchronized` false when the kernel flags the clock unsynchronised; `errorUs` its estimated
    /// error in microseconds (nil when unsynchronised or when the kernel cannot say).
    static func status() -> (synchronized: Bool?, errorUs: Int64?) {
        var error = 0
        switch chaos_clock_status(&error) {
        case 0: return (true, Int64(error))
        case 1: return (false, nil)
        default: return (nil, nil)
        }
    }
}
