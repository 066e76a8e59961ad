/// A named counter of protocol events, or a family of counts by code (a close code, an HTTP/2 error code, a gRPC
/// status), that the audit sums and the reports render generically. `name` is the `protocol_events` key of
/// report.json in camelCase (`closeCodes` is written `close_codes`, and a family's counts per fault
/// `close_codes_by_fault`); `title` is what the reports call it.
package struct ProtocolCounter: Sendable, Equatable {
    /// The report.json key (camelCase; written in snake_case).
    package var name: String
    /// What the reports call it (`close codes`).
    package var title: String
    /// A remark the reports add after a family's counts, if any.
    package var note: String?

    /// A counter or a family.
    package init(_ name: String, _ title: String, note: String? = nil) {
        self.name = name
        self.title = title
        self.note = note
    }
}
