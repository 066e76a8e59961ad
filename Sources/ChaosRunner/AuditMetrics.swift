import ChaosAudit
import ChaosProxy

/// The live audit's figures as Prometheus families, appended to `GET /metrics` when the run audits a protocol.
enum AuditMetrics {
    static func text(_ audit: AuditResult) -> String {
        var text = MetricsText()
        let totals = audit.totals
        let classes: [(String, Int64)] = [
            ("sent", totals.sent), ("delivered", totals.delivered), ("ok", totals.ok), ("lost", totals.lost),
            ("recovered", totals.recovered), ("duplicated", totals.duplicated), ("redelivered", totals.redelivered),
            ("reordered", totals.reordered), ("unacked", totals.unacked), ("truncated", totals.truncated),
        ]
        // Gauges: the audit revises a class as it learns more (a message lost so far may still arrive).
        text.family("chaos_audit_messages", "gauge", "Messages so far, by class (lost: so far).") {
            classes.map { ([("class", $0.0)], $0.1) }
        }
        text.family("chaos_audit_gaps", "gauge", "Gaps in sequence numbers so far.") { [([], totals.gaps)] }
        text.family("chaos_audit_delivery_ratio", "gauge", "Delivered over sent so far.",
                    values: [([], totals.deliveryRatio)])
        let recovery = audit.recovery
        for (name, help, summary) in [
            ("chaos_audit_reconnect_seconds", "From a fault's disruption to the next accepted connection.", recovery.reconnectS),
            ("chaos_audit_resume_seconds", "From a fault's disruption to a stream's first new message.", recovery.resumeS),
        ] {
            text.family(name, "gauge", help + " Quantiles so far.", values: [
                ([("quantile", "0.5")], summary.p50), ([("quantile", "0.95")], summary.p95),
                ([("quantile", "0.99")], summary.p99), ([("quantile", "1")], summary.max),
            ])
            text.family(name + "_count", "gauge", help + " Measurements so far.") { [([], summary.count)] }
        }
        text.family("chaos_audit_never_resumed", "gauge", "Streams a fault interrupted that never resumed (so far).") {
            [([], recovery.neverResumed)]
        }
        return text.output
    }
}
