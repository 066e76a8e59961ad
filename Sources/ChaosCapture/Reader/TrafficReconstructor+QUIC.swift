import ChaosCore
import ChaosTLSDecryption

/// The QUIC connections of a capture read with a key log: a UDP flow whose first datagram is a client's Initial (a
/// long header of a version chaos opens) is a QUIC connection, its client the Initial's sender. Each of its datagrams
/// was sent by one end and received by the other (a capture of the pair's own path: no proxy between them), and the
/// QUIC stream events (``QUICStreamEvents``) make each stream a connection of the audit's.
final class QUICCaptureFlows {
    let streams: QUICStreamEvents
    /// The UDP flows known to be QUIC connections: their connection (in the capture's numbering) and client end.
    var connections: [FlowKey: (id: ConnectionID, client: WireEndpoint)] = [:]
    /// Flows whose first datagram was not a QUIC Initial (DNS, another protocol, a connection begun before the
    /// capture): skipped. Forgotten past ``notQUICLimit`` flows, so that a flood of them stays bounded.
    var notQUIC: Set<FlowKey> = []
    static let notQUICLimit = 65536

    init(keyLog: KeyLog, newID: @escaping () -> ConnectionID) {
        streams = QUICStreamEvents(secrets: { keyLog.secrets(for: $0) }, newID: newID)
    }
}

extension TrafficReconstructor {
    /// Handles one UDP datagram seen at `time`: with a key log, a QUIC connection's datagram becomes its streams'
    /// events; without one (or when it is not QUIC) it is skipped.
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
        let key = FlowKey(datagram.source, datagram.destination)
        let payload = Array(datagram.payload)
        var connection = quic.connections[key]
        if connection == nil {
            guard !quic.notQUIC.contains(key), QUICDatagram.beginsConnection(payload[...]) else {
                if quic.notQUIC.count >= QUICCaptureFlows.notQUICLimit { quic.notQUIC.removeAll() }
                quic.notQUIC.insert(key)
                statistics.skippedPackets += 1
                return
            }
            let id = nextConnection
            nextConnection += 1
            connection = (id, datagram.source)
            quic.connections[key] = connection
            statistics.quicConnections += 1
            let client = datagram.source.text
            let server = datagram.destination.text
            let endpoints = ConnectionEndpoints(proxy: options.proxyName, client: client, listen: server, proxyLocal: client, server: server)
            outbox += quic.streams.transform(TrafficEvent(time: time, connection: id, kind: .opened(endpoints)))
        }
        guard let connection else { return }
        if datagram.missingPayload > 0 { statistics.truncatedPackets += 1 }
        let from: Side = datagram.source == connection.client ? .client : .server
        outbox += quic.streams.transform(TrafficEvent(time: time, connection: connection.id, kind: .read(from, payload)))
        outbox += quic.streams.transform(TrafficEvent(time: time, connection: connection.id, kind: .written(from.other, payload)))
        statistics.quicPacketsOpened = quic.streams.packetsOpened
        statistics.quicPacketsUnopened = quic.streams.packetsUnopened
        statistics.quicProblems = quic.streams.firstProblems
    }
}
