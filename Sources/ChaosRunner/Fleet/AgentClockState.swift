import ChaosCore
import Foundation

/// One agent's clock as the merge corrects it: the offset taken out of its timestamps and what that rests on.
struct AgentClockState {
    /// Nanoseconds the agent's clock was ahead (subtracted from its timestamps).
    let offsetNs: Int64
    /// Where the offset comes from, for the report.
    let source: String
    /// What may remain of the agent's clock error once corrected: a measurement's uncertainty, else the host's NTP
    /// estimate (0 when its clock state is unknown).
    let residualNs: Int64

    init(given: Int64?, measured: MeasuredClockOffset?, header: EventFileHeader) {
        let ntp = header.clockSynchronized == true ? (header.clockErrorUs ?? 0) * 1_000 : 0
        if let given {
            offsetNs = given
            source = "--clock-offset"
            residualNs = ntp
        } else if let measured {
            offsetNs = measured.offsetNs
            source =
                "measured by the merge at \(measured.measuredAt): ±"
                + String(format: "%.3f", Double(measured.uncertaintyNs) / 1e6) + " ms (best of \(measured.exchanges) exchanges)"
            residualNs = measured.uncertaintyNs
        } else {
            offsetNs = 0
            source = "none (a folder merged as it is; the host's NTP state bounds the error)"
            residualNs = ntp
        }
    }
}
