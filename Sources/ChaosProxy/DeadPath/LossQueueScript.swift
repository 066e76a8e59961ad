import Foundation

/// The rules that send a lossy flow's packets to the kernel loss queue (``KernelLoss``), as text for
/// `iptables-restore --noflush` (`ip6tables-restore` for IPv6): one rule per flow in the `raw` table's `PREROUTING`
/// chain (where the dead path's nftables rules hook too: the sender saw its segment leave), carrying the NFQUEUE target,
/// which nftables reaches only through iptables (a kernel without `nft_queue` still has it). Each rule names its
/// process in a comment (`chaos_<pid>`), so that the rules of a chaos that was killed can be found and removed.
package enum LossQueueScript {
    /// The rule queueing `flow` to `queue`, as `iptables-save` prints it (without its `-A`/`-D` verb).
    package static func rule(_ flow: KernelFlow, queue: UInt16, comment: String) -> String {
        let prefix = flow.isIPv6 ? "128" : "32"
        return "PREROUTING -s \(flow.sourceIP)/\(prefix) -d \(flow.destinationIP)/\(prefix) -p tcp -m tcp --sport \(flow.sourcePort) "
            + "--dport \(flow.destinationPort) -m comment --comment \(comment) -j NFQUEUE --queue-num \(queue) --queue-bypass"
    }

    /// The scripts (IPv4, IPv6; nil where nothing changes) that queue the flows going to `.queued` and stop queueing
    /// those leaving it; deletions first.
    package static func change(
        _ changes: [(flow: KernelFlow, from: KernelDrop?, to: KernelDrop?)],
        queue: UInt16,
        comment: String
    ) -> (ipv4: String?, ipv6: String?) {
        func script(ipv6: Bool) -> String? {
            let mine = changes.filter { $0.flow.isIPv6 == ipv6 && ($0.from == .queued) != ($0.to == .queued) }
            let lines =
                mine.filter { $0.from == .queued }.map { "-D " + rule($0.flow, queue: queue, comment: comment) }
                + mine.filter { $0.to == .queued }.map { "-A " + rule($0.flow, queue: queue, comment: comment) }
            return lines.isEmpty ? nil : (["*raw"] + lines + ["COMMIT"]).joined(separator: "\n") + "\n"
        }
        return (script(ipv6: false), script(ipv6: true))
    }

    /// A script deleting the rules in `saved` (`iptables-save -t raw` output) whose comment names a chaos process for
    /// which `remove` is true (nil: none).
    package static func removal(in saved: String, remove: (Int32) -> Bool) -> String? {
        let lines = saved.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("-A PREROUTING "), let range = line.range(of: "--comment \(NftScript.tablePrefix)") else { return nil }
            let pid = line[range.upperBound...].prefix { $0.isNumber }
            guard let pid = Int32(pid), remove(pid) else { return nil }
            return "-D " + line.dropFirst("-A ".count)
        }
        return lines.isEmpty ? nil : (["*raw"] + lines + ["COMMIT"]).joined(separator: "\n") + "\n"
    }
}
