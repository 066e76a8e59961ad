extension Int64 {
    /// `self + other`, held at `Int64.max` / `Int64.min` instead of trapping (delays built from user values).
    @inline(__always)
    package func saturatingAdding(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
