/// What a person did to a running run through its control API (the live page's buttons, or a client of the API):
/// paused or resumed the fault schedule, fired a fault, stopped the run. The report's timeline lists them.
package struct ManualAction: Sendable, Codable, Equatable {
    /// What was done.
    package enum Kind: String, Sendable, Codable {
        case pause, resume, fault, stop
    }

    /// When, in seconds since the start of the run.
    package var atS: Double
    /// What was done.
    package var action: Kind
    /// The fault as it was posted, how long a pause lasted, or why the run stopped.
    package var detail: String?

    /// An action at `atS` seconds.
    package init(atS: Double, action: Kind, detail: String? = nil) {
        self.atS = atS
        self.action = action
        self.detail = detail
    }
}
