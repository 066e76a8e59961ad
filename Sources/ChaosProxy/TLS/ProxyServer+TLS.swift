import ChaosCore
import ChaosTLS
import NIOCore
import NIOPosix
import NIOSSL

/// A proxy with a `tls:` block (PRODUCT.md section 9): the client's ClientHello is read first (its SNI and ALPN
/// offer), the upstream is dialled and its TLS handshake done offering the same protocols, then the client is
/// answered with a leaf for its SNI signed by chaos's CA and the protocol the upstream chose. Each leg's pipeline is
/// then socket ← wire meter ← TLS ← plaintext meter ← shaper ← relay: faults, shaping and the audit see plaintext,
/// and delivery waits for the TCP acknowledgement of the record that carried a byte (``TLSRecordMap``).
extension ProxyServer {
    func acceptTLS(_ client: any Channel, id: ConnectionID, tls: TLSInterceptor) {
        let generator = seed.fork("connection", id)
        let loop = client.eventLoop
        let deadline = loop.scheduleTask(in: .nanoseconds(options.connectTimeout.nanoseconds)) { [self] in
            upstreamFailed(client: client, reason: "TLS: no ClientHello from \(client.remoteAddress?.hostPort ?? "?") in \(options.connectTimeout)")
        }
        let reader = ClientHelloReader { [self] result in
            deadline.cancel()
            switch result {
            case .success(let hello):
                gateHandshake(client, hello: hello) { [self] in
                    dialTLS(client, hello: hello, id: id, tls: tls, generator: generator)
                }
            case .failure(let error):
                upstreamFailed(client: client, reason: "TLS from \(client.remoteAddress?.hostPort ?? "?"): \(error)")
            }
        }
        do {
            try addLegHandlers(client, side: .client, generator: generator)
            try client.pipeline.syncOperations.addHandler(reader, position: .first)
        } catch {
            deadline.cancel()
            client.closeWithReset()
        }
    }

    /// Dials the upstream for a client whose ClientHello is `hello`, then answers the client.
    private func dialTLS(
        _ client: any Channel,
        hello: ClientHello,
        id: ConnectionID,
        tls: TLSInterceptor,
        generator: SeededGenerator
    ) {
        let loop = client.eventLoop
        let deadline = loop.scheduleTask(in: .nanoseconds(options.connectTimeout.nanoseconds)) { [self] in
            upstreamFailed(client: client, reason: "TLS: the upstream \(spec.upstream) did not complete its handshake in \(options.connectTimeout)")
        }
        let offer = tls.upstreamOffer(for: hello)
        let handshake = loop.makePromise(of: String?.self)
        let upstream = spec.upstream
        let bootstrap = relayBootstrap(loop)
            .connectTimeout(.nanoseconds(options.connectTimeout.nanoseconds))
            .channelInitializer { [self] server in
                server.eventLoop.makeCompletedFuture {
                    try addLegHandlers(server, side: .server, generator: generator)
                    guard let context = try tls.clientContext(offering: offer) else { return handshake.succeed(nil) }
                    let handler = try NIOSSLClientHandler(context: context, serverHostname: tls.upstreamServerName(for: hello))
                    try Self.addTLSHandlers(handler, to: server, watcher: HandshakeWatcher(done: handshake))
                }
            }
        let sourced = fromSourceAddress(bootstrap)
        let connecting = upstreamAddress.map { sourced.connect(to: $0) } ?? sourced.connect(host: upstream.host, port: upstream.port)
        connecting.whenFailure { handshake.fail($0) }
        connecting.and(handshake.futureResult).whenComplete { [self] result in
            deadline.cancel()
            switch result {
            case .success(let (server, negotiated)):
                do {
                    let answer = tls.clientAnswer(for: hello, negotiated: negotiated)
                    let name = tls.serverName(for: hello)
                    // A client that pins a host name sees the names the verified upstream's certificate carries.
                    let upstreamNames =
                        tls.copiesUpstreamNames
                        ? ((try? server.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self))?.peerCertificate)
                            .map(LeafIssuer.alternativeNames) ?? []
                        : []
                    let context = try tls.serverContext(name: name, protocols: answer, upstreamNames: upstreamNames)
                    let accepted = loop.makePromise(of: String?.self)
                    let watcher = HandshakeWatcher(done: accepted)
                    // On the client's loop (the upstream leg shares it), where the watcher lives in its pipeline.
                    let late = loop.assumeIsolated().scheduleTask(in: .nanoseconds(options.connectTimeout.nanoseconds)) {
                        watcher.fail(ChaosError.badInput("no TLS handshake from the client in \(self.options.connectTimeout)"))
                    }
                    try Self.addTLSHandlers(NIOSSLServerHandler(context: context), to: client, watcher: watcher)
                    // What the reader kept goes to the client's TLS handler; the connection is wired once the client accepted.
                    _ = client.pipeline.syncOperations.removeHandler(try client.pipeline.syncOperations.handler(type: ClientHelloReader.self))
                    accepted.futureResult.whenComplete { [self] result in
                        late.cancel()
                        switch result {
                        case .success: _ = wire(id: id, client: client, server: server)
                        case .failure(let error):
                            server.close(promise: nil)
                            clientRejected(client, name: name, hello: hello, error: error)
                        }
                    }
                } catch {
                    server.closeWithReset()
                    upstreamFailed(client: client, reason: "TLS to the client \(hello.serverName ?? "(no SNI)"): \(error)")
                }
            case .failure(let error):
                connecting.whenSuccess { $0.closeWithReset() }
                // A TCP failure is the upstream's, as on cleartext; a handshake that failed is a TLS event.
                let tlsFailed = error is NIOSSLError || error is BoringSSLError
                upstreamFailed(
                    client: client,
                    reason: (tlsFailed ? TLSSpec.refusalPrefix : "") + "upstream \(upstream) (TLS"
                        + "\(offer.isEmpty ? "" : ", ALPN \(offer.joined(separator: ","))")): \(tlsFailed ? TLSFailure.describe(error) : "\(error)")"
                )
            }
        }
    }

    /// A client that did not complete its handshake with chaos's leaf (it does not trust chaos's CA, or pins another
    /// certificate): a `tls` event naming the alert, the name and the client, with the hint to trust the CA.
    private func clientRejected(_ client: any Channel, name: String, hello: ClientHello, error: any Error) {
        counters.upstreamFailed()
        let address = client.remoteAddress?.hostPort ?? "?"
        sink?.record(
            TrafficEvent(
                time: clock.now(),
                connection: 0,
                kind: .refused(
                    proxy: spec.name,
                    reason: "\(TLSSpec.refusalPrefix)the client \(address) aborted its handshake with chaos's certificate for "
                        + "\(hello.serverName.map { "SNI \($0)" } ?? "\(name) (no SNI)") (\(TLSFailure.describe(error))): most likely it does not "
                        + "trust chaos's CA; trust it in the client (chaos ca --hint)"
                )
            )
        )
        client.close(promise: nil)
    }

    /// A TLS leg that fails in TLS once wired (an upstream's alert after the handshake: it wants a client
    /// certificate) is a `tls` event naming that side.
    func reportTLSFailures(of connection: ProxiedConnection, client: any Channel) {
        let upstream = spec.upstream
        let name = spec.name
        let address = client.remoteAddress?.hostPort ?? "?"
        connection.onTLSFailure = { [weak self] side, error in
            guard let self else { return }
            let who = side == .server ? "the upstream \(upstream)" : "the client \(address)"
            sink?.record(
                TrafficEvent(
                    time: clock.now(),
                    connection: 0,
                    kind: .refused(
                        proxy: name,
                        reason: "\(TLSSpec.refusalPrefix)\(who) ended the connection with a TLS error: \(TLSFailure.describe(error))"
                    )
                )
            )
        }
    }

    /// Puts a leg's TLS handler in below its shaper, between the wire and plaintext meters of one record map.
    private static func addTLSHandlers(_ handler: any ChannelHandler, to channel: any Channel, watcher: HandshakeWatcher?) throws {
        let sync = channel.pipeline.syncOperations
        let map = TLSRecordMap()
        let shaper = try sync.handler(type: ShapingHandler.self)
        try sync.addHandler(TLSWireMeter(map: map), position: .first)
        try sync.addHandler(handler, position: .before(shaper))
        if let watcher { try sync.addHandler(watcher, position: .before(shaper)) }
        try sync.addHandler(TLSPlaintextMeter(map: map), position: .before(shaper))
    }
}
