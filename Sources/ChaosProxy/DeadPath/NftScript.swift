/// The nftables scripts of the kernel dead path (``KernelDeadPath``), as text for `nft -f -`: a table of chaos's own
/// per process (`inet chaos_<pid>`), four sets of flows (IPv4 and IPv6, dropped whole or all but pure
/// acknowledgements) and the rules that drop them, hooked at `prerouting` so that the sender's stack saw its segment
/// leave (a drop at `output` would fail the send with EPERM, which no dead path does).
package enum NftScript {
    /// The prefix of the tables chaos makes; the rest of the name is the process id.
    package static let tablePrefix = "chaos_"

    /// The table of process `pid`.
    package static func tableName(pid: Int32) -> String { "\(tablePrefix)\(pid)" }

    /// The set holding the flows dropped as `drop` says, for one address family.
    package static func setName(_ drop: KernelDrop, ipv6: Bool) -> String {
        (drop == .everything ? "dead" : "data") + (ipv6 ? "6" : "4")
    }

    /// What the sets drop (a queued flow is not in them: ``LossQueueScript``'s rules queue it).
    static let dropped: [KernelDrop] = [.everything, .data]

    /// Makes `table` with its sets, chain and rules (empty sets: nothing is dropped yet).
    package static func create(table: String) -> String {
        var lines = ["add table inet \(table)"]
        for ipv6 in [false, true] {
            let family = ipv6 ? "ipv6_addr" : "ipv4_addr"
            for drop in dropped {
                lines.append(
                    "add set inet \(table) \(setName(drop, ipv6: ipv6)) { type \(family) . inet_service . \(family) . inet_service; }"
                )
            }
        }
        lines.append("add chain inet \(table) prerouting { type filter hook prerouting priority -300; policy accept; }")
        for ipv6 in [false, true] {
            let ip = ipv6 ? "ip6" : "ip"
            let flow = { (drop: KernelDrop) in
                "add rule inet \(table) prerouting meta l4proto tcp \(ip) saddr . tcp sport . \(ip) daddr . tcp dport @\(setName(drop, ipv6: ipv6))"
            }
            lines.append("\(flow(.everything)) drop")
            // One way only: a segment that carries a byte, a SYN, a FIN or a RST is dropped; a pure acknowledgement
            // (its IP length is its headers': the TCP header is `doff` words) passes.
            lines.append("\(flow(.data)) tcp flags & (syn | fin | rst) != 0 drop")
            for words in 5...15 {
                if ipv6 {
                    lines.append("\(flow(.data)) tcp doff \(words) ip6 length != \(words * 4) drop")
                } else {
                    lines.append("\(flow(.data)) ip hdrlength 5 tcp doff \(words) ip length != \(20 + words * 4) drop")
                }
            }
            if !ipv6 { lines.append("\(flow(.data)) ip hdrlength != 5 drop") }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Deletes `table`, its sets and rules.
    package static func delete(table: String) -> String { "delete table inet \(table)\n" }

    /// Moves flows between sets: each flow in `changes` leaves the set it was in (`from`) and joins the one it goes to
    /// (`to`; nil: dropped no more). One script, applied by nft as one transaction.
    package static func change(table: String, _ changes: [(flow: KernelFlow, from: KernelDrop?, to: KernelDrop?)]) -> String {
        var lines: [String] = []
        for (verb, pick) in [("delete", { (c: (flow: KernelFlow, from: KernelDrop?, to: KernelDrop?)) in c.from }), ("add", { $0.to })] {
            var bySet: [String: [String]] = [:]
            for change in changes where change.from != change.to {
                guard let drop = pick(change), dropped.contains(drop) else { continue }
                bySet[setName(drop, ipv6: change.flow.isIPv6), default: []].append(change.flow.setElement)
            }
            for set in bySet.keys.sorted() {
                lines.append("\(verb) element inet \(table) \(set) { \(bySet[set]!.joined(separator: ", ")) }")
            }
        }
        return lines.isEmpty ? "" : lines.joined(separator: "\n") + "\n"
    }

    /// The chaos tables in `nft list tables` output whose process is gone (`isAlive` false): left by a chaos that was
    /// killed before it could remove them.
    package static func staleTables(in listing: String, isAlive: (Int32) -> Bool) -> [String] {
        listing.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            guard words.count == 3, words[0] == "table", words[1] == "inet", words[2].hasPrefix(tablePrefix),
                let pid = Int32(words[2].dropFirst(tablePrefix.count)), !isAlive(pid)
            else { return nil }
            return String(words[2])
        }
    }
}
