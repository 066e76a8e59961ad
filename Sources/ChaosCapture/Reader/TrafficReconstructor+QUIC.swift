import ChaosCore
import ChaosTLSDecryption

/// The QUIC connections of a capture read with a key log. A UDP flow whose first datagram is a client's Initial (a
/// long header of a version chaos opens) begins a QUIC connection, its client the Initial's sender. A second flow that
/// begins with an Initial to the same Destination Connection ID is a second leg of the same connection: a proxy's (a
/// chaos `udp://` proxy forwards each datagram unchanged, and dials the server with the client's first), unless legs
/// are not paired. Later flows of a known connection (a client that migrated, a proxy's server leg moved by a `rebind`
/// or a `handoff`) are told by the connection IDs their packets are sent to. The QUIC stream events
/// (``QUICStreamEvents``) make each stream a connection of the audit's.
final class QUICCaptureFlows {
    /// What one UDP flow of a QUIC connection is.
    struct Leg {
        enum Role {
            /// The ends' own path (no proxy between them): each datagram read from its sender and written to the other
            /// end at once.
            case direct
            /// Between the client and the proxy: what the client sent is read, what reached the client was written.
            case client
            /// Between the proxy and the server: what the proxy sent was written to the server, what the server sent read.
            case server
        }
        var connection: ConnectionID
        var role: Role
        /// This flow's end on the client's side: the client (``Role/direct``, ``Role/client``) or the proxy.
        var clientEnd: WireEndpoint
    }

    /// One QUIC connection of the capture.
    struct Connection {
        /// Its first flow (the client's own: direct, or its leg to the proxy) and that flow's other end.
        var firstFlow: FlowKey
        var firstServerEnd: WireEndpoint
        /// Through a proxy: its listen endpoint, once the proxy's server leg showed (nil: the ends' own path).
        var proxyListen: WireEndpoint?
        /// The proxy's server leg now: another one later is the proxy's move of the flow (a `rebind`, a `handoff`).
        var serverFlow: FlowKey?
    }

    let streams: QUICStreamEvents
    /// The UDP flows known to carry a QUIC connection.
    var legs: [FlowKey: Leg] = [:]
    var connections: [ConnectionID: Connection] = [:]
    /// The connections by their client's first Destination Connection ID.
    var byInitialDestination: [[UInt8]: ConnectionID] = [:]
    /// Flows whose first datagram was neither a QUIC Initial nor sent to a connection ID a known connection issued
    /// (DNS, another protocol, a connection begun before the capture): skipped. Forgotten past ``notQUICLimit`` flows,
    /// so that a flood of them stays bounded.
    var notQUIC: Set<FlowKey> = []
    static let notQUICLimit = 65536
    /// The time of the last datagram: the connections still open end there.
    var lastTime: Int64 = 0

    init(keyLog: KeyLog, newID: @escaping () -> ConnectionID) {
        streams = QUICStreamEvents(secrets: { keyLog.secrets(for: $0) }, newID: newID)
    }
}

extension TrafficReconstructor {
    /// Handles one UDP datagram seen at `time`: with a key log, a QUIC connection's datagram becomes its streams'
    /// events (read from its sender, written to its receiver, as the leg it crossed says); without one (or when it is
    /// not QUIC) it is skipped.
    func consume(datagram: DecodedDatagram, time: Int64) {
        statistics.udpDatagrams += 1
        guard let keyLog = options.keyLog else {
            statistics.skippedPackets += 1
            return
        }
        let quic =
            self.quic
            ?? QUICCaptureFlows(keyLog: keyLog) { [unowned self] in
                defer { nextConnection += 1 }
                return nextConnection
            }
        self.quic = quic
        quic.lastTime = time
        let key = FlowKey(datagram.source, datagram.destination)
        let payload = Array(datagram.payload)
        guard let leg = quic.legs[key] ?? newLeg(key, datagram, payload[...], quic: quic, time: time) else {
            statistics.skippedPackets += 1
            return
        }
        if datagram.missingPayload > 0 { statistics.truncatedPackets += 1 }
        let fromClientSide = datagram.source == leg.clientEnd
        if leg.role == .server, !fromClientSide, quic.connections[leg.connection]?.serverFlow != key {
            // The server answered a socket the proxy had closed when it moved the flow: the proxy never read it.
            statistics.skippedPackets += 1
            return
        }
        let kinds: [TrafficEvent.Kind]
        switch leg.role {
        case .direct:
            let from: Side = fromClientSide ? .client : .server
            kinds = [.read(from, payload), .written(from.other, payload)]
        case .client:
            kinds = [fromClientSide ? .read(.client, payload) : .written(.client, payload)]
        case .server:
            kinds = [fromClientSide ? .written(.server, payload) : .read(.server, payload)]
        }
        for kind in kinds { outbox += quic.streams.transform(TrafficEvent(time: time, connection: leg.connection, kind: kind)) }
        noteQUIC(quic)
    }

    /// The end of the capture: the QUIC connections still open end at its last datagram.
    func finishQUIC() {
        guard let quic else { return }
        outbox += quic.streams.endAll(at: quic.lastTime)
        noteQUIC(quic)
        statistics.quicPaths = quic.streams.paths
    }

    private func noteQUIC(_ quic: QUICCaptureFlows) {
        statistics.quicPacketsOpened = quic.streams.packetsOpened
        statistics.quicPacketsUnopened = quic.streams.packetsUnopened
        statistics.quicProblems = quic.streams.firstProblems
    }

    /// The leg of a flow not seen before, from its first datagram: a new connection's, another leg of a known one, or
    /// nil (not QUIC, or of no connection followed).
    private func newLeg(
        _ key: FlowKey,
        _ datagram: DecodedDatagram,
        _ payload: ArraySlice<UInt8>,
        quic: QUICCaptureFlows,
        time: Int64
    ) -> QUICCaptureFlows.Leg? {
        guard !quic.notQUIC.contains(key) else { return nil }
        let leg: QUICCaptureFlows.Leg?
        if let destination = QUICDatagram.initialDestination(payload) {
            leg = initialLeg(key, datagram, destination: destination, quic: quic, time: time)
        } else if let known = quic.streams.connection(sentTo: payload) {
            leg = laterLeg(key, datagram, connection: known.id, sender: known.sender, quic: quic, time: time)
        } else {
            leg = nil
        }
        guard let leg else {
            if quic.notQUIC.count >= QUICCaptureFlows.notQUICLimit { quic.notQUIC.removeAll() }
            quic.notQUIC.insert(key)
            return nil
        }
        quic.legs[key] = leg
        return leg
    }

    /// A flow that begins with a client's Initial: a new connection, or (the Initial's Destination Connection ID
    /// known, legs paired) the proxy's server leg of one.
    private func initialLeg(
        _ key: FlowKey,
        _ datagram: DecodedDatagram,
        destination: [UInt8],
        quic: QUICCaptureFlows,
        time: Int64
    ) -> QUICCaptureFlows.Leg {
        if options.pairing != .off, let id = quic.byInitialDestination[destination], var connection = quic.connections[id] {
            if connection.proxyListen == nil {
                // The proxy's first dial: the connection's first flow was the client's leg to it.
                connection.proxyListen = connection.firstServerEnd
                quic.legs[connection.firstFlow]?.role = .client
            }
            let touchesProxy = datagram.destination == connection.proxyListen || datagram.source == connection.proxyListen
            if !touchesProxy { moveServerLeg(of: id, &connection, to: key, quic: quic, time: time) }
            quic.connections[id] = connection
            return QUICCaptureFlows.Leg(connection: id, role: touchesProxy ? .client : .server, clientEnd: datagram.source)
        }
        let id = nextConnection
        nextConnection += 1
        statistics.quicConnections += 1
        quic.connections[id] = QUICCaptureFlows.Connection(firstFlow: key, firstServerEnd: datagram.destination)
        quic.byInitialDestination[destination] = id
        let client = datagram.source.text
        let server = datagram.destination.text
        let endpoints = ConnectionEndpoints(proxy: options.proxyName, client: client, listen: server, proxyLocal: client, server: server)
        outbox += quic.streams.transform(TrafficEvent(time: time, connection: id, kind: .opened(endpoints)))
        return QUICCaptureFlows.Leg(connection: id, role: .direct, clientEnd: datagram.source)
    }

    /// A new flow of connection `id`, its first datagram sent by `sender`: through a proxy, the client's leg (it
    /// touches the proxy's listen endpoint) or a new server leg (the proxy moved the flow); else the ends' own new path
    /// (a client that migrated).
    private func laterLeg(
        _ key: FlowKey,
        _ datagram: DecodedDatagram,
        connection id: ConnectionID,
        sender: Side,
        quic: QUICCaptureFlows,
        time: Int64
    ) -> QUICCaptureFlows.Leg? {
        guard var connection = quic.connections[id] else { return nil }
        let clientEnd = sender == .client ? datagram.source : datagram.destination
        guard let listen = connection.proxyListen else {
            return QUICCaptureFlows.Leg(connection: id, role: .direct, clientEnd: clientEnd)
        }
        if datagram.source == listen || datagram.destination == listen {
            return QUICCaptureFlows.Leg(connection: id, role: .client, clientEnd: clientEnd)
        }
        moveServerLeg(of: id, &connection, to: key, quic: quic, time: time)
        quic.connections[id] = connection
        return QUICCaptureFlows.Leg(connection: id, role: .server, clientEnd: clientEnd)
    }

    /// The proxy's server leg of `id` is `key` now: a change from another is the proxy's move of the flow, which the
    /// connection's path watch and its streams hear as the live run's proxy tells them (a path event `rebound`).
    private func moveServerLeg(
        of id: ConnectionID,
        _ connection: inout QUICCaptureFlows.Connection,
        to key: FlowKey,
        quic: QUICCaptureFlows,
        time: Int64
    ) {
        defer { connection.serverFlow = key }
        guard let previous = connection.serverFlow, previous != key else { return }
        outbox += quic.streams.transform(TrafficEvent(time: time, connection: id, kind: .path(.rebound)))
    }
}
