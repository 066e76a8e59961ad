package import ChaosCore
import ChaosTLS
import NIOCore
import Synchronization

/// The `handshake` fault's state on one proxy: how many occurrences of each mode are in force, and the clients a
/// stall holds (each resumed when the last stall ends).
struct HandshakeFaults: Sendable {
    var stalls = 0
    var fails = 0
    var held: [ObjectIdentifier: @Sendable () -> Void] = [:]
}

/// The `handshake` fault (PRODUCT.md section 9): while it lasts, a TLS client whose ClientHello is read gets no answer
/// (`stall`, as behind a captive portal or a stuck middlebox) or a fatal alert (`fail`). Connections already past
/// their handshake are untouched: the fault acts only where a new handshake would begin.
extension ProxyServer {
    package func beginHandshakeFault(_ mode: HandshakeMode) {
        state.withLock { state in
            switch mode {
            case .stall: state.handshakeFaults.stalls += 1
            case .fail: state.handshakeFaults.fails += 1
            }
        }
    }

    package func endHandshakeFault(_ mode: HandshakeMode) {
        let resumed = state.withLock { state -> [@Sendable () -> Void] in
            switch mode {
            case .stall: state.handshakeFaults.stalls = max(0, state.handshakeFaults.stalls - 1)
            case .fail: state.handshakeFaults.fails = max(0, state.handshakeFaults.fails - 1)
            }
            guard state.handshakeFaults.stalls == 0 else { return [] }
            defer { state.handshakeFaults.held = [:] }
            return Array(state.handshakeFaults.held.values)
        }
        for resume in resumed { resume() }
    }

    /// Lets the handshake of `client` (its ClientHello read by its ``ClientHelloReader``) go on now (`proceed`), holds
    /// it until the stall ends, or refuses it with an alert, as the handshake faults in force say. A fail outranks a
    /// stall. Runs on the client's event loop.
    func gateHandshake(_ client: any Channel, hello: ClientHello, proceed: @escaping @Sendable () -> Void) {
        let key = ObjectIdentifier(client)
        let name = hello.serverName.map { "SNI \($0)" } ?? "no SNI"
        let resume: @Sendable () -> Void = { [self] in
            client.eventLoop.execute { [self] in
                guard client.isActive else { return refusedByFault(client, "the client left its stalled handshake (\(name))") }
                try? client.pipeline.syncOperations.handler(type: ClientHelloReader.self).release()
                proceed()
            }
        }
        let mode = state.withLock { state -> HandshakeMode? in
            if state.handshakeFaults.fails > 0 { return .fail }
            guard state.handshakeFaults.stalls > 0 else { return nil }
            state.handshakeFaults.held[key] = resume
            return .stall
        }
        guard let mode else { return proceed() }
        // Looked up rather than captured: the reader's own callback calls this, and must not keep the reader alive.
        guard let reader = try? client.pipeline.syncOperations.handler(type: ClientHelloReader.self) else { return }
        switch mode {
        case .fail:
            refusedByFault(client, "answered the ClientHello (\(name)) with a handshake_failure alert")
            reader.refuse()
        case .stall:
            reader.hold { [self] in
                // Still held (not resumed yet): the client gave up during the stall.
                guard state.withLock({ $0.handshakeFaults.held.removeValue(forKey: key) }) != nil else { return }
                refusedByFault(client, "the client left its stalled handshake (\(name))")
                client.close(promise: nil)
            }
        }
    }

    /// A connection that a handshake fault kept from its handshake is a refused one (the fault's doing, not a TLS
    /// failure of the pair's).
    private func refusedByFault(_ client: any Channel, _ what: String) {
        sink?.record(
            TrafficEvent(
                time: clock.now(),
                connection: 0,
                kind: .refused(
                    proxy: spec.name,
                    reason: "handshake fault: \(what) from \(client.remoteAddress?.hostPort ?? "?")"
                )
            )
        )
    }
}
