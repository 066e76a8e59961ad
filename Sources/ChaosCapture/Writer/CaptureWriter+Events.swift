import ChaosCore

extension CaptureWriter {
    /// Turns one event into packets. Called with the lock held.
    func apply(_ event: TrafficEvent) throws {
        let id = event.connection
        switch event.kind {
        case .opened(let endpoints):
            var connection = SynthesizedConnection(
                clientLeg: SynthesizedLeg(
                    peer: IPEndpoint.parse(endpoints.client),
                    proxyEnd: IPEndpoint.parse(endpoints.listen),
                    peerDialled: true,
                    seed: id &* 2 &+ 1
                ),
                serverLeg: SynthesizedLeg(
                    peer: IPEndpoint.parse(endpoints.server),
                    proxyEnd: IPEndpoint.parse(endpoints.proxyLocal),
                    peerDialled: false,
                    seed: id &* 2 &+ 2
                )
            )
            let clientHandshake = connection.clientLeg.handshake()
            let serverHandshake = connection.serverLeg.handshake()
            let note = decryptedProxies.contains(endpoints.proxy) ? Self.decryptedComment(proxy: endpoints.proxy) : nil
            try emit(clientHandshake, on: connection.clientLeg, payload: [], time: event.time, firstComment: note)
            try emit(serverHandshake, on: connection.serverLeg, payload: [], time: event.time)
            storeOrForget(connection, id: id)
        case .read(let side, let bytes):
            try transfer(bytes, on: side, fromPeer: true, id: id, time: event.time)
        case .written(let side, let bytes):
            try transfer(bytes, on: side, fromPeer: false, id: id, time: event.time)
        case .acknowledged(let side, let bytes), .acknowledgedAfterClose(let side, let bytes):
            guard var connection = connections[id] else { break }
            let ack = connection[side].acknowledge(upTo: bytes)
            try emit(ack, on: connection[side], payload: [], time: event.time)
            storeOrForget(connection, id: id)
        case .closed(let side, let how):
            try close(side, how, id: id, time: event.time)
        case .refused, .faultStarted, .faultEnded, .stopping, .path, .tls:
            break
        }
    }

    private func transfer(_ bytes: [UInt8], on side: Side, fromPeer: Bool, id: ConnectionID, time: Int64) throws {
        guard var connection = connections[id] else {
            ignoredEvents += 1
            return
        }
        let planned = connection[side].data(fromPeer: fromPeer, count: bytes.count)
        if planned.isEmpty, !bytes.isEmpty { ignoredEvents += 1 }
        try emit(planned, on: connection[side], payload: bytes, time: time)
        if !fromPeer, connection[side].proxyFinIsDue {
            // The last of the bytes the relay held when the other leg's FIN came: its FIN follows them.
            try sendProxyFin(on: side, of: &connection, time: time)
            return storeOrForget(connection, id: id, keep: true)
        }
        connections[id] = connection
    }

    /// The proxy end's FIN that still waits on `side`'s leg goes now, before what the leg's next close shows (its peer's
    /// FIN or RST, a fault's cut): the relay wrote what it held before that, or the fault dropped it.
    private func sendWaitingFin(on side: Side, of connection: inout SynthesizedConnection, time: Int64) throws {
        if connection[side].proxyFinDue != nil { try sendProxyFin(on: side, of: &connection, time: time) }
    }

    /// The proxy end's FIN on `side`'s leg (nothing when the leg is reset or the FIN went already).
    private func sendProxyFin(on side: Side, of connection: inout SynthesizedConnection, time: Int64) throws {
        try emit(connection[side].finish(fromPeer: false), on: connection[side], payload: [], time: time)
    }

    /// Sends every FIN that still waits (the capture ends: the relay's last bytes were never recorded as written).
    func sendWaitingFins(time: Int64) throws {
        for id in connections.keys.sorted() {
            guard var connection = connections[id] else { continue }
            for side in [Side.client, .server] { try sendWaitingFin(on: side, of: &connection, time: time) }
            connections[id] = connection
        }
    }

    private func close(_ side: Side, _ how: TrafficEvent.CloseKind, id: ConnectionID, time: Int64) throws {
        guard var connection = connections[id] else {
            ignoredEvents += 1
            return
        }
        switch how {
        case .resetByFault, .resetByProxy:
            // The proxy resets the leg: a FIN still waiting for held bytes never went.
            connection[side].proxyFinDue = nil
        default:
            try sendWaitingFin(on: side, of: &connection, time: time)
        }
        switch how {
        case .fin:
            let sent = connection[side].peerSentBytes
            let peerFin = connection[side].finish(fromPeer: true)
            try emit(peerFin, on: connection[side], payload: [], time: time)
            // The relay passes the FIN on behind every byte it read before it: at once when it has written them all,
            // else after the last of them (``transfer(_:on:fromPeer:id:time:)``).
            if !connection[side.other].proxyFinished, !connection[side.other].reset {
                connection[side.other].proxyFinDue = sent
                if connection[side.other].proxyFinIsDue { try sendProxyFin(on: side.other, of: &connection, time: time) }
            }
            // Kept a while once over, as after a cut: a peer that closed while the proxy still held bytes for it (a
            // partition's) answers them with a RST, which the relay records after the FINs.
            return storeOrForget(connection, id: id, keep: true)
        case .reset, .error:
            let rst = connection[side].abort(fromPeer: true)
            try emit(rst, on: connection[side], payload: [], time: time)
        case .cutByFault:
            // A FIN cut: the proxy's FIN, and its peer's answer (the wire of a peer that closes in turn, as the pair's do).
            let cut = connection[side].finish(fromPeer: false)
            try emit(cut, on: connection[side], payload: [], time: time)
            let answer = connection[side].finish(fromPeer: true)
            try emit(answer, on: connection[side], payload: [], time: time)
            // Kept a while, even when over: the peer may answer the cut with a RST (its socket closed with bytes
            // unread), which the relay records after it.
            return storeOrForget(connection, id: id, keep: true)
        case .resetByFault, .resetByProxy:
            let rst = connection[side].abort(fromPeer: false)
            try emit(rst, on: connection[side], payload: [], time: time)
        }
        storeOrForget(connection, id: id)
    }

    /// Keeps a connection while anything can still happen on it. One closed both ways whose peer never
    /// acknowledged the last bytes (or, with `keep`, one that FINs or a FIN cut ended) waits among at most
    /// ``lingeringLimit`` others, oldest dropped first.
    private func storeOrForget(_ connection: SynthesizedConnection, id: ConnectionID, keep: Bool = false) {
        if !keep, connection.clientLeg.isOver, connection.serverLeg.isOver {
            connections[id] = nil
            return
        }
        let wasClosed = connections[id]?.isClosed ?? false
        connections[id] = connection
        guard connection.isClosed, !wasClosed else { return }
        lingeringOrder.append(id)
        while lingeringOrder.count > Self.lingeringLimit { connections[lingeringOrder.removeFirst()] = nil }
    }

    /// Writes `segments` of `leg`; the first carries `firstComment`, if any.
    private func emit(
        _ segments: [PlannedSegment],
        on leg: SynthesizedLeg,
        payload: [UInt8],
        time: Int64,
        firstComment: String? = nil
    ) throws {
        guard !segments.isEmpty else { return }
        let stamp = startedAtNanoseconds &+ time
        try payload.withUnsafeBytes { bytes in
            for (index, segment) in segments.enumerated() {
                let source = segment.fromPeer ? leg.peer : leg.proxyEnd
                let destination = segment.fromPeer ? leg.proxyEnd : leg.peer
                let slice = UnsafeRawBufferPointer(rebasing: bytes[segment.payload])
                try builder.withSegment(
                    from: source,
                    to: destination,
                    sequence: segment.sequence,
                    acknowledgement: segment.acknowledgement,
                    flags: segment.flags,
                    payload: slice
                ) { packet in
                    try files.write(packet, epochNanoseconds: stamp, comment: index == 0 ? firstComment : nil)
                }
            }
        }
    }
}
