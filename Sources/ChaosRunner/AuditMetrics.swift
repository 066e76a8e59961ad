import ChaosAudit
import ChaosControl
import ChaosProxy

/// The live audit's figures as Prometheus families, appended to `GET /metrics` when the run audits a protocol.
enum AuditMetrics {
    /// The audit's histograms so far: recovery (reconnect, resume) and the messages' transit.
    struct Histograms {
        var reconnect: DurationHistogram
        var resume: DurationHistogram
        var transit: DurationHistogram
    }

    static func text(_ audit: AuditResult, histograms: Histograms) -> String {
        var text = MetricsText()
        let totals = audit.totals
        let classes: [(String, Int64)] = [
            ("sent", totals.sent), ("delivered", totals.delivered), ("ok", totals.ok), ("lost", totals.lost),
            ("recovered", totals.recovered), ("duplicated", totals.duplicated), ("redelivered", totals.redelivered), ("retained", totals.retained),
            ("reordered", totals.reordered), ("unacked", totals.unacked), ("truncated", totals.truncated),
        ]
        // Gauges: the audit revises a class as it learns more (a message lost so far may still arrive).
        text.family("chaos_audit_messages", "gauge", "Messages so far, by class (lost: so far).") {
            classes.map { ([("class", $0.0)], $0.1) }
        }
        text.family("chaos_audit_gaps", "gauge", "Gaps in sequence numbers so far.") { [([], totals.gaps)] }
        text.family(
            "chaos_audit_delivery_ratio",
            "gauge",
            "Delivered over sent so far.",
            values: [([], totals.deliveryRatio)]
        )
        let recovery = audit.recovery
        for (name, help, histogram) in [
            ("chaos_audit_reconnect_seconds", "From a fault's disruption to the next accepted connection.", histograms.reconnect),
            ("chaos_audit_resume_seconds", "From a fault's disruption to a stream's first new message.", histograms.resume),
            ("chaos_audit_transit_seconds", "A message's transit: the proxy's read to the consumer's acknowledgement.", histograms.transit),
        ] {
            text.histogram(name, help, histogram)
        }
        text.family("chaos_audit_never_resumed", "gauge", "Streams a fault interrupted that never resumed (so far).") {
            [([], recovery.neverResumed)]
        }
        return text.output
    }
}

extension MetricsText {
    /// Adds a Prometheus histogram: cumulative `_bucket{le}` samples, then `_sum` and `_count`.
    mutating func histogram(_ name: String, _ help: String, _ histogram: DurationHistogram) {
        var values: [([(String, String)], Double)] = zip(histogram.bounds, histogram.cumulative).map {
            ([("le", "\($0.0)")], Double($0.1))
        }
        values.append(([("le", "+Inf")], Double(histogram.count)))
        family(name, "histogram", help, values: [])
        samples(name + "_bucket", values)
        samples(name + "_sum", [([], histogram.sumSeconds)])
        samples(name + "_count", [([], Double(histogram.count))])
    }
}
