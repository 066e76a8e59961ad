package import ChaosCore

extension QUICStreamEvents {
    /// The connection a datagram seen on a path not seen before belongs to, told by the connection ID its first
    /// packet is sent to (one an end issued: its Source Connection ID, its NEW_CONNECTION_ID frames; or a client's
    /// first Destination Connection ID), and which end sent it: a client that migrated, or a proxy's leg that moved.
    /// Nil when no connection followed issued it.
    package func connection(sentTo datagram: ArraySlice<UInt8>) -> (id: ConnectionID, sender: Side)? {
        guard let first = datagram.first else { return nil }
        if first & 0x80 != 0 {
            // A long header names its Destination Connection ID with its length.
            guard let packet = (try? QUICDatagram.packets(in: datagram, shortHeaderIDLength: { _ in nil }))?.first else { return nil }
            return match { flow, ids, sender in
                ids.contains(packet.destination) || (sender == .client && packet.destination == flow.decoder.initialDestination)
            }
        }
        // A short header's is as long as the one its receiver issued that it begins with (never a zero-length one:
        // every datagram begins with that).
        let rest = datagram.dropFirst()
        return match { _, ids, _ in ids.contains { !$0.isEmpty && rest.starts(with: $0) } }
    }

    /// The flow and sender for which `matches(flow, the IDs the receiver issued, sender)` holds; the lowest connection
    /// first.
    private func match(_ matches: (QUICFlow, Set<[UInt8]>, QUICSender) -> Bool) -> (id: ConnectionID, sender: Side)? {
        for id in flows.keys.sorted() {
            guard let flow = flows[id] else { continue }
            for sender in [QUICSender.client, .server] where matches(flow, flow.decoder.issuedIDs[sender.other] ?? [], sender) {
                return (id, sender == .client ? .client : .server)
            }
        }
        return nil
    }

    /// Ends every flow still followed at `time` (a capture's end), both sides closed in order: the events that means.
    package func endAll(at time: Int64) -> [TrafficEvent] {
        var events: [TrafficEvent] = []
        for id in flows.keys.sorted() {
            for side in [Side.client, .server] { events += transform(TrafficEvent(time: time, connection: id, kind: .closed(side, .fin))) }
        }
        return events
    }
}
