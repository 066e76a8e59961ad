import ChaosCore
import ChaosTLSDecryption
import Synchronization

extension ScenarioRunner {
    /// The first connection number of a QUIC stream: far above the proxies' own (a run's connections are counted
    /// from 1), so that a stream and a flow never share one.
    static let firstQUICStreamConnection: ConnectionID = 1 << 48

    /// With `transport: quic`: the QUIC streams' events of every UDP flow, their packets opened with the key logs the
    /// pair writes as the run goes (read again when a connection's secrets are not there yet).
    static func quicStreams(_ spec: ProtocolSpec?) -> sending QUICStreamEvents? {
        guard let spec, spec.transport == .quic else { return nil }
        let keys = LiveKeyLog(paths: spec.keylog ?? [])
        var next = firstQUICStreamConnection
        return QUICStreamEvents(
            secrets: { keys.secrets(for: $0) },
            newID: {
                defer { next += 1 }
                return next
            }
        )
    }
}
