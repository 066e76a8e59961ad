import ChaosCore
import ChaosTLSDecryption

extension TrafficReconstructor {
    /// Decides what a new flow is: a connection of its own, a server leg of a waiting client leg,
    /// or a client leg that waits.
    func assignRole(_ flow: TCPFlow, time: Int64) throws {
        guard flow.openedWithSYN else { return try makeStandalone(flow, time: time) }
        switch options.pairing {
        case .off:
            try makeStandalone(flow, time: time)
        case .proxyPort(let port):
            if flow.server.port == port {
                pendingClientLegs.append(flow)
            } else if try !placeServerLeg(flow, time: time, requireOtherPort: false) {
                try makeStandalone(flow, time: time)
            }
        case .automatic:
            if try !placeServerLeg(flow, time: time, requireOtherPort: true) {
                pendingClientLegs.append(flow)
            }
        }
    }

    /// Makes `flow` the server leg of a waiting client leg: paired at once with the only candidate,
    /// or left waiting (see ``settleServerLegs(time:force:)``) when there are several. False when
    /// there is none.
    private func placeServerLeg(_ flow: TCPFlow, time: Int64, requireOtherPort: Bool) throws -> Bool {
        let candidates = clientLegCandidates(for: flow, time: time, requireOtherPort: requireOtherPort)
        guard let first = candidates.first else { return false }
        if candidates.count > 1 {
            pendingServerLegs.append(PendingServerLeg(flow: flow, candidates: candidates))
            return true
        }
        pendingClientLegs.removeAll { $0 === first }
        try pair(first, with: flow, time: time)
        // A pending server leg may have counted on this client leg.
        if !pendingServerLegs.isEmpty { try settleServerLegs(time: time) }
        return true
    }

    /// The waiting client legs, oldest first, that `flow` can be the server leg of: the proxy host
    /// (where the client leg went) dialled it, within the window.
    private func clientLegCandidates(for flow: TCPFlow, time: Int64, requireOtherPort: Bool) -> [TCPFlow] {
        pendingClientLegs.filter { leg in
            (!requireOtherPort || leg.server.sameHost(as: flow.client)) && !leg.finished
                && (!requireOtherPort || leg.server.port != flow.server.port)
                && time - leg.firstTime <= activeWindow
        }
    }

    /// How long a client leg waits for its server leg (and a server leg for its payload to tell).
    var activeWindow: Int64 {
        if case .proxyPort = options.pairing { return options.proxyPairingWindow }
        return options.pairingWindow
    }

    /// Waiting server legs whose window has passed take their best candidate; waiting client legs
    /// whose window has passed (and that no waiting server leg may still take) become connections
    /// of their own.
    func expirePendingLegs(at time: Int64) throws {
        if pendingServerLegs.contains(where: { time - $0.flow.firstTime > activeWindow }) {
            try settleServerLegs(time: time)
        }
        var index = 0
        while index < pendingClientLegs.count, time - pendingClientLegs[index].firstTime > activeWindow {
            let leg = pendingClientLegs[index]
            if isClaimed(leg) {
                index += 1
            } else {
                pendingClientLegs.remove(at: index)
                try resolveUnpaired(leg, time: time)
            }
        }
    }

    /// A client leg that found no server leg. With an explicit proxy port, one the proxy closed
    /// without any payload is a refused connection; anything else is a connection of its own.
    func resolveUnpaired(_ flow: TCPFlow, time: Int64) throws {
        guard flow.isPending else { return }
        pendingClientLegs.removeAll { $0 === flow }
        if case .proxyPort = options.pairing, flow.finished, !flow.carriedPayload {
            let id = nextConnection
            nextConnection += 1
            flow.role = .standalone(id)
            _ = flow.releaseHeld()
            outbox.append(
                TrafficEvent(
                    time: flow.firstTime,
                    connection: id,
                    kind: .refused(
                        proxy: options.proxyName,
                        reason: "closed before the proxy dialled the server"
                    )
                )
            )
            return
        }
        try makeStandalone(flow, time: flow.firstTime)
    }

    func makeStandalone(_ flow: TCPFlow, time: Int64) throws {
        let id = nextConnection
        nextConnection += 1
        flow.role = .standalone(id)
        statistics.connections += 1
        let client = flow.client.text
        let server = flow.server.text
        outbox.append(
            TrafficEvent(
                time: flow.firstTime,
                connection: id,
                kind: .opened(
                    ConnectionEndpoints(
                        proxy: options.proxyName,
                        client: client,
                        listen: server,
                        proxyLocal: client,
                        server: server
                    )
                )
            )
        )
        try replayHeld(flow)
    }

    /// Pairs two legs into one connection, opened at `time` (the server leg's SYN).
    func pair(_ clientLeg: TCPFlow, with serverLeg: TCPFlow, time: Int64) throws {
        let id = nextConnection
        nextConnection += 1
        clientLeg.role = .clientLeg(id)
        serverLeg.role = .serverLeg(id)
        statistics.connections += 1
        statistics.pairedConnections += 1
        outbox.append(
            TrafficEvent(
                time: time,
                connection: id,
                kind: .opened(
                    ConnectionEndpoints(
                        proxy: options.proxyName,
                        client: clientLeg.client.text,
                        listen: clientLeg.server.text,
                        proxyLocal: serverLeg.client.text,
                        server: serverLeg.server.text
                    )
                )
            )
        )
        try replayHeld(clientLeg, serverLeg)
    }

    /// Reports the events `flows` held, interleaved in the order they were seen.
    private func replayHeld(_ flows: TCPFlow...) throws {
        if flows.count == 1, let flow = flows.first {
            // One flow's events are in order already.
            for event in flow.releaseHeld() { try route(event.event, of: flow) }
            return
        }
        let held = flows.flatMap { flow in flow.releaseHeld().map { (held: $0, flow: flow) } }
            .sorted { $0.held.order < $1.held.order }
        for (event, flow) in held { try route(event.event, of: flow) }  // already through the flow's TLS
    }

    /// Maps a flow event to traffic events (through the flow's TLS decryption, with a key log).
    func report(_ event: FlowEvent, of flow: TCPFlow) throws {
        if case .fin(let fromClient, _) = event, flow.firstFINFromClient == nil { flow.firstFINFromClient = fromClient }
        guard let keyLog = options.keyLog else { return try route(event, of: flow) }
        switch event {
        case .data(let towardServer, let bytes, let time):
            if !flow.tlsDecided, !bytes.isEmpty {
                flow.tlsDecided = true
                if TLSConversation.looksLikeTLS(bytes) {
                    flow.tls = TLSConversation(keyLog: keyLog, client: flow.client.text, server: flow.server.text)
                }
            }
            guard let tls = flow.tls else { return try route(event, of: flow) }
            try route(tls.receive(bytes, towardServer: towardServer, captureLoss: flow.lossBeforeData), of: flow, time: time)
        case .acknowledged(let towardServer, let bytes, let time):
            guard let tls = flow.tls else { return try route(event, of: flow) }
            try route(tls.acknowledge(towardServer: towardServer, tcpBytes: bytes), of: flow, time: time)
        case .acknowledgementsCut(let towardServer, let bytes, let time):
            guard let tls = flow.tls else { return try route(event, of: flow) }
            // The plaintext those bytes complete (the flow ends here: nothing is acknowledged after).
            for case .acknowledged(let towardServer, let upTo, afterClose: false) in tls.acknowledge(towardServer: towardServer, tcpBytes: bytes) {
                try route(.acknowledgementsCut(towardServer: towardServer, bytes: upTo, time: time), of: flow)
            }
        default:
            try route(event, of: flow)
        }
    }

    private func route(_ outputs: [TLSConversation.Output], of flow: TCPFlow, time: Int64) throws {
        for output in outputs {
            switch output {
            case .plaintext(let towardServer, let bytes):
                try route(.data(towardServer: towardServer, bytes: bytes, time: time), of: flow)
            case .acknowledged(let towardServer, let upTo, let afterClose):
                try route(
                    afterClose
                        ? .acknowledgedAfterClose(towardServer: towardServer, bytes: upTo, time: time)
                        : .acknowledged(towardServer: towardServer, bytes: upTo, time: time),
                    of: flow
                )
            case .note(let note):
                try route(.tls(note, time: time), of: flow)
            }
        }
    }

    /// Maps a flow event to traffic events by the flow's role (held while it is pending).
    private func route(_ event: FlowEvent, of flow: TCPFlow) throws {
        if case .data(_, let bytes, _) = event, !bytes.isEmpty, !flow.carriedPayload { flow.carriedPayload = true }
        switch flow.role {
        case .pending:
            flow.held.append(HeldEvent(order: nextHeldOrder, event: event))
            nextHeldOrder += 1
            if case .data(let towardServer, let bytes, _) = event {
                flow.firstBytes.record(bytes, towardServer: towardServer)
                flow.heldBytes += bytes.count
            }
        case .standalone(let id):
            switch event {
            case .data(let towardServer, let bytes, let time):
                statistics.payloadBytes += bytes.count
                let producer: Side = towardServer ? .client : .server
                outbox.append(TrafficEvent(time: time, connection: id, kind: .read(producer, bytes)))
                outbox.append(TrafficEvent(time: time, connection: id, kind: .written(producer.other, bytes)))
            case .fin(let fromClient, let time):
                outbox.append(TrafficEvent(time: time, connection: id, kind: .closed(fromClient ? .client : .server, .fin)))
            case .reset(let fromClient, let time):
                outbox.append(TrafficEvent(time: time, connection: id, kind: .closed(fromClient ? .client : .server, .reset)))
            case .acknowledged(let towardServer, let bytes, let time):
                outbox.append(TrafficEvent(time: time, connection: id, kind: .acknowledged(towardServer ? .server : .client, upTo: bytes)))
            case .acknowledgedAfterClose(let towardServer, let bytes, let time):
                outbox.append(TrafficEvent(time: time, connection: id, kind: .acknowledgedAfterClose(towardServer ? .server : .client, upTo: bytes)))
            case .acknowledgementsCut(let towardServer, let bytes, let time):
                outbox.append(
                    TrafficEvent(time: time, connection: id, kind: .path(.acknowledgementsCut(towardServer ? .server : .client, upTo: bytes)))
                )
            case .tls(let note, let time):
                outbox.append(TrafficEvent(time: time, connection: id, kind: .tls(note)))
            }
        case .clientLeg(let id), .serverLeg(let id):
            let leg: Side
            if case .clientLeg = flow.role { leg = .client } else { leg = .server }
            // On the client leg the flow's client is the peer; on the server leg it is the proxy.
            let peerIsFlowClient = leg == .client
            switch event {
            case .data(let towardServer, let bytes, let time):
                statistics.payloadBytes += bytes.count
                let fromPeer = towardServer == peerIsFlowClient
                outbox.append(
                    TrafficEvent(
                        time: time,
                        connection: id,
                        kind: fromPeer ? .read(leg, bytes) : .written(leg, bytes)
                    )
                )
            case .fin(let fromClient, let time):
                var ends = legEnds[id, default: LegEnds()]
                if fromClient == peerIsFlowClient {
                    // The peer's FIN: its answer to a FIN cut (the live proxy records `cut-by-fault` then), or its own.
                    ends.peerFIN.insert(leg)
                    let how: TrafficEvent.CloseKind = ends.proxyCut.contains(leg) ? .cutByFault : .fin
                    legEnds[id] = ends.peerFIN.count == 2 ? nil : ends
                    outbox.append(TrafficEvent(time: time, connection: id, kind: .closed(leg, how)))
                } else if !ends.peerFIN.contains(leg.other) {
                    // A FIN from the proxy is the relay passing the other side's half-close on, unless that side sent
                    // none: then the proxy closed the leg on its own, a fault's FIN cut.
                    ends.proxyCut.insert(leg)
                    legEnds[id] = ends
                }
            case .reset(let fromClient, let time):
                legEnds[id] = nil
                // The peer's own RST, or one the proxy sent it (the live proxy records those by their reason).
                let how: TrafficEvent.CloseKind = fromClient == peerIsFlowClient ? .reset : .resetByProxy
                outbox.append(TrafficEvent(time: time, connection: id, kind: .closed(leg, how)))
            case .acknowledged(let towardServer, let bytes, let time):
                // Only the peer's acknowledgements of what the proxy wrote to it matter to the audit.
                if towardServer != peerIsFlowClient {
                    outbox.append(TrafficEvent(time: time, connection: id, kind: .acknowledged(leg, upTo: bytes)))
                }
            case .acknowledgedAfterClose(let towardServer, let bytes, let time):
                if towardServer != peerIsFlowClient {
                    outbox.append(TrafficEvent(time: time, connection: id, kind: .acknowledgedAfterClose(leg, upTo: bytes)))
                }
            case .acknowledgementsCut(let towardServer, let bytes, let time):
                // Toward the peer, on a leg the proxy did not close with a fault's FIN cut (the live relay's rule too).
                if towardServer != peerIsFlowClient, legEnds[id]?.proxyCut.contains(leg) != true {
                    outbox.append(TrafficEvent(time: time, connection: id, kind: .path(.acknowledgementsCut(leg, upTo: bytes))))
                }
            case .tls(let note, let time):
                // A proxy's two legs are two TLS sessions: the client leg's ALPN and problems speak for the connection.
                if leg == .client || { if case .problem = note { true } else { false } }() {
                    outbox.append(TrafficEvent(time: time, connection: id, kind: .tls(note)))
                }
            }
        }
    }
}

/// How the two legs of a paired connection are ending: which peers sent FIN, and which legs the proxy sent FIN on
/// while the other leg's peer had sent none (it closed them on its own: a fault's FIN cut, which the live proxy records
/// as `cut-by-fault` when the peer answers).
struct LegEnds {
    var peerFIN: Set<Side> = []
    var proxyCut: Set<Side> = []
}
