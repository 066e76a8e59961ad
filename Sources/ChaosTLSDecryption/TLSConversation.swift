package import ChaosCore

/// Decrypts one TCP conversation's TLS with the secrets of a key log: fed the conversation's TCP bytes each way in
/// order (and the receivers' acknowledgements in TCP bytes), it hands back the application plaintext each way, the
/// receivers' acknowledgements in plaintext bytes (a byte is taken once the end of the record that carried it is),
/// and what it learnt (`TLSNote`: the version, suite and ALPN; or why it stopped).
///
/// TLS 1.3: the handshake and application traffic secrets by client random, HKDF-Expand-Label for each key and IV,
/// the per-record nonce, the real content type at the inner plaintext's end, KeyUpdate's next generation; a
/// HelloRetryRequest and middlebox-compatibility ChangeCipherSpecs are followed, 0-RTT data is skipped. TLS 1.2:
/// the master secret of `CLIENT_RANDOM`, the PRF's key block, ChangeCipherSpec switching each direction, AES-GCM's
/// explicit nonce and ChaCha20-Poly1305's. Primitives come from swift-crypto.
package final class TLSConversation {
    /// What the conversation hands back.
    package enum Output: Equatable {
        /// Application bytes, client → server when `towardServer`.
        case plaintext(towardServer: Bool, bytes: [UInt8])
        /// The receiver of the bytes travelling `towardServer` took the first `upTo` plaintext bytes; `afterClose`:
        /// written after it had sent close_notify.
        case acknowledged(towardServer: Bool, upTo: Int64, afterClose: Bool)
        /// What the handshake chose, or a problem.
        case note(TrafficEvent.TLSNote)
    }

    /// The largest protected record (RFC 8446 §5.2: 2^14 + 256).
    static let largestRecord = 16_384 + 256
    /// The most records one handshake message may be split over, and its largest size.
    static let handshakeRecordLimit = 64
    static let largestHandshakeMessage = 1 << 18
    /// The most client records held while the ServerHello is awaited.
    static let heldRecordLimit = 64

    /// Whether `bytes`, a conversation's first, start like a TLS record (content type 20–23, version 3.x).
    package static func looksLikeTLS(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 3 && (20...23).contains(bytes[0]) && bytes[1] == 3 && bytes[2] <= 4
    }

    private let keyLog: KeyLog
    /// `client → server`, for messages.
    private let name: String
    private var client = TLSDirection(towardServer: true)
    private var server = TLSDirection(towardServer: false)
    private var clientHello: ClientHelloFacts?
    private var serverHello: ServerHelloFacts?
    private var suite: CipherSuite?
    private var secrets: KeyLog.Secrets?
    private var announced = false
    /// Client records that came before the ServerHello was read (ordering across directions, or 0-RTT).
    private var heldClientRecords: [(header: [UInt8], body: [UInt8], end: Int64)] = []
    /// The whole conversation stopped (no keys, a capture started mid-connection…).
    private var stopped = false
    private var outputs: [Output] = []

    /// Records decrypted, and application bytes handed out, both ways.
    package private(set) var recordsDecrypted = 0
    package private(set) var plaintextBytes: Int64 = 0
    /// Whether a problem stopped (part of) the decryption.
    package private(set) var hadProblem = false
    /// The key log has no keys for this conversation's client random, and the client has sent nothing since its
    /// ClientHello but ChangeCipherSpecs and plaintext alerts: a handshake it abandoned (killed while connecting, a
    /// certificate it refused, a probe), which carried no application data, not a conversation the audit failed to
    /// read. Its first record of any other kind makes it one.
    package var abandonedHandshake: Bool { missingKeys != nil }
    /// Why the conversation cannot be decrypted, held until the client shows it went past its ClientHello.
    private var missingKeys: String?
    /// Whether the client sent a record that is not its ClientHello, a ChangeCipherSpec or a plaintext alert.
    private var clientWentOn = false

    /// A conversation between `client` and `server` (text, for messages), decrypted with `keyLog`.
    package init(keyLog: KeyLog, client: String, server: String) {
        self.keyLog = keyLog
        name = "\(client) → \(server)"
    }

    /// Takes the next TCP bytes travelling `towardServer`; `captureLoss` is the reassembler's count of bytes that
    /// direction lost so far (a hole stops its decryption: record boundaries and numbers are lost with it).
    package func receive(_ bytes: [UInt8], towardServer: Bool, captureLoss: Int = 0) -> [Output] {
        if missingKeys != nil {
            if towardServer { watchForClientProgress(bytes) }
            return take()
        }
        if stopped { return [] }
        if client.records == 0, server.records == 0, client.buffer.isEmpty, server.buffer.isEmpty,
            bytes.first != 22
        {
            stop("the capture starts mid-connection (no handshake; the first record is of type \(bytes.first ?? 0)): not decrypted")
            return take()
        }
        withDirection(towardServer) { direction in
            guard direction.phase != .stopped, !stopped else { return }
            if captureLoss > direction.lossSeen {
                direction.lossSeen = captureLoss
                if direction.records > 0 || !direction.buffer.isEmpty {
                    stopDirection(&direction, "capture loss after record \(direction.records)")
                    return
                }
            }
            direction.buffer += bytes
            while direction.phase != .stopped, !stopped {
                if let length = direction.declaredLength, length > Self.largestRecord {
                    if towardServer { clientWentOn = true }
                    direction.records += 1
                    stopDirection(&direction, "record \(direction.records) is \(length) bytes, over 2^14 + 256")
                    return
                }
                guard let record = direction.nextRecord() else { break }
                process(header: record.header, body: record.body, end: record.end, in: &direction)
            }
            direction.compact()
        }
        if towardServer { covered(&server) } else { covered(&client) }
        return take()
    }

    /// The receiver of the bytes travelling `towardServer` acknowledged `tcpBytes` of them.
    package func acknowledge(towardServer: Bool, tcpBytes: Int64) -> [Output] {
        withDirection(towardServer) { direction in
            direction.acknowledged = max(direction.acknowledged, tcpBytes)
            covered(&direction)
        }
        return take()
    }

    private func take() -> [Output] {
        defer { outputs.removeAll(keepingCapacity: true) }
        return outputs
    }

    private func withDirection(_ towardServer: Bool, _ body: (inout TLSDirection) -> Void) {
        if towardServer { body(&client) } else { body(&server) }
    }

    private func covered(_ direction: inout TLSDirection) {
        let covered = direction.newlyCovered()
        if let delivered = covered.delivered {
            outputs.append(.acknowledged(towardServer: direction.towardServer, upTo: delivered, afterClose: false))
        }
        if let taken = covered.afterClose {
            outputs.append(.acknowledged(towardServer: direction.towardServer, upTo: taken, afterClose: true))
        }
    }

    // MARK: - Records

    private func process(header: ArraySlice<UInt8>, body: ArraySlice<UInt8>, end: Int64, in direction: inout TLSDirection) {
        let type = header[header.startIndex]
        let version = (header[header.startIndex + 1], header[header.startIndex + 2])
        if direction.towardServer, !(20...22).contains(type) { clientWentOn = true }
        if type == 20 {  // ChangeCipherSpec: TLS 1.2 switches this direction to its new key; TLS 1.3 ignores it
            if suite?.isTLS13 == false, let next = direction.pendingCipher {
                direction.cipher = next
                direction.pendingCipher = nil
                direction.phase = .protected
            }
            return
        }
        guard !stopped else { return }
        switch direction.phase {
        case .stopped:
            return
        case .clear:
            switch type {
            case 22: handshakeBytes(body, in: &direction)
            case 21: alert(Array(body), in: &direction)
            case 23 where direction.towardServer && serverHello == nil:
                guard heldClientRecords.count < Self.heldRecordLimit else {
                    return stopDirection(&direction, "more than \(Self.heldRecordLimit) protected records before the server's hello")
                }
                heldClientRecords.append((Array(header), Array(body), end))
            default:
                stopDirection(&direction, "record \(direction.records) is of type \(type) before the handshake protected the connection")
            }
        case .protected:
            guard var cipher = direction.cipher else { return }
            let opened: (type: UInt8, content: [UInt8])
            do {
                if cipher.suite.isTLS13 {
                    opened = try cipher.openTLS13(header: header, body: body)
                } else {
                    opened = (type, try cipher.openTLS12(type: type, version: version, body: body))
                }
            } catch {
                if direction.towardServer, direction.underHandshakeKeys, !direction.decryptedAny,
                    clientHello?.offersEarlyData == true
                {
                    direction.skippedEarlyData += 1  // 0-RTT data, under the early secret: not decrypted
                    return
                }
                return stopDirection(&direction, "decryption failed at record \(direction.records) (a wrong secret, or a corrupt record)")
            }
            direction.cipher = cipher
            direction.decryptedAny = true
            recordsDecrypted += 1
            switch opened.type {
            case 23:
                guard !opened.content.isEmpty else { return }
                direction.carried(opened.content.count, endingAt: end)
                plaintextBytes += Int64(opened.content.count)
                outputs.append(.plaintext(towardServer: direction.towardServer, bytes: opened.content))
            case 22: handshakeBytes(opened.content[...], in: &direction)
            case 21: alert(opened.content, in: &direction)
            default:
                stopDirection(&direction, "record \(direction.records) holds content type \(opened.type)")
            }
        }
    }

    private func alert(_ body: [UInt8], in direction: inout TLSDirection) {
        // close_notify (description 0): what the other side writes from now on reaches a receiver that ended its session.
        guard body.count >= 2, body[1] == 0 else { return }
        if direction.towardServer { server.receiverClosed = true } else { client.receiverClosed = true }
    }

    // MARK: - Handshake messages

    private func handshakeBytes(_ bytes: ArraySlice<UInt8>, in direction: inout TLSDirection) {
        direction.handshake += bytes
        direction.handshakeRecords += 1
        while direction.handshake.count >= 4, direction.phase != .stopped, !stopped {
            let length = Int(direction.handshake[1]) << 16 | Int(direction.handshake[2]) << 8 | Int(direction.handshake[3])
            guard length <= Self.largestHandshakeMessage else {
                return stopDirection(&direction, "a handshake message of \(length) bytes at record \(direction.records)")
            }
            guard direction.handshake.count >= 4 + length else {
                if direction.handshakeRecords >= Self.handshakeRecordLimit {
                    stopDirection(
                        &direction,
                        "a handshake message split across more than \(Self.handshakeRecordLimit) records (at record \(direction.records))"
                    )
                }
                return
            }
            let type = direction.handshake[0]
            let message = Array(direction.handshake[4..<(4 + length)])
            direction.handshake.removeFirst(4 + length)
            direction.handshakeRecords = direction.handshake.isEmpty ? 0 : 1
            handshakeMessage(type, message[...], in: &direction)
        }
    }

    private func handshakeMessage(_ type: UInt8, _ body: ArraySlice<UInt8>, in direction: inout TLSDirection) {
        if direction.towardServer, type != 1 { clientWentOn = true }
        switch (type, direction.towardServer) {
        case (1, true):
            guard let hello = ClientHelloFacts(body: body) else {
                return stop("the ClientHello does not parse (record \(direction.records))")
            }
            if clientHello == nil { clientHello = hello }
        case (2, false):
            serverHelloRead(body, in: &direction)
        case (8, false):
            announce(alpn: encryptedExtensionsALPN(body: body))
        case (20, _):
            finished(&direction)
        case (24, _):
            keyUpdate(&direction)
        default:
            break  // certificates, key exchanges, tickets: nothing to decrypt with
        }
    }

    private func serverHelloRead(_ body: ArraySlice<UInt8>, in direction: inout TLSDirection) {
        guard let hello = ServerHelloFacts(body: body) else {
            return stop("the ServerHello does not parse (record \(direction.records))")
        }
        guard !hello.isRetryRequest else { return }  // a HelloRetryRequest: a second ClientHello and ServerHello follow
        guard serverHello == nil else { return }
        serverHello = hello
        guard let clientHello else {
            return stop("no ClientHello before the ServerHello (the capture missed the handshake's start): not decrypted")
        }
        guard let suite = CipherSuite.supported(hello.suite), suite.isTLS13 == (hello.version == 0x0304) else {
            return stop("\(CipherSuite.describe(hello.suite)) is not a suite chaos decrypts (TLS 1.3, or TLS 1.2 with AES-GCM or ChaCha20-Poly1305)")
        }
        guard hello.version == 0x0304 || hello.version == 0x0303 else {
            return stop("TLS version 0x\(String(hello.version, radix: 16)) is not decrypted (TLS 1.2 and 1.3 are)")
        }
        self.suite = suite
        let random = clientHello.random.map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
        guard let secrets = keyLog.secrets(for: clientHello.random) else {
            return keysMissing("TLS, no keys for client random \(random) in the key log: not decrypted")
        }
        self.secrets = secrets
        if suite.isTLS13 {
            guard let serverSecret = secrets.serverHandshake, let clientSecret = secrets.clientHandshake,
                serverSecret.count == suite.hashLength, clientSecret.count == suite.hashLength
            else {
                // A TLS 1.3 client logs the server's handshake secret as it reads the ServerHello and its own as it
                // writes its Finished: a client cut between the two left one line, and a handshake it abandoned.
                return keysMissing("TLS 1.3, no handshake traffic secrets for client random \(random) in the key log: not decrypted")
            }
            let serverKeys = KeyDerivation.trafficKeys(serverSecret, suite: suite)
            direction.cipher = RecordCipher(suite: suite, key: serverKeys.key, iv: serverKeys.iv)
            direction.phase = .protected
            direction.underHandshakeKeys = true
            let clientKeys = KeyDerivation.trafficKeys(clientSecret, suite: suite)
            client.cipher = RecordCipher(suite: suite, key: clientKeys.key, iv: clientKeys.iv)
            if client.phase != .stopped { client.phase = .protected }  // (direction is the server's)
            client.underHandshakeKeys = true
            replayHeldClientRecords()
        } else {
            guard let master = secrets.masterSecret else {
                return stop("TLS 1.2, no CLIENT_RANDOM line for client random \(random) in the key log: not decrypted")
            }
            let keys = KeyDerivation.tls12Keys(master: master, clientRandom: clientHello.random, serverRandom: hello.random, suite: suite)
            direction.pendingCipher = RecordCipher(suite: suite, key: keys.server.key, iv: keys.server.iv)
            client.pendingCipher = RecordCipher(suite: suite, key: keys.client.key, iv: keys.client.iv)
            announce(alpn: hello.alpn)
        }
    }

    /// No keys for this conversation: a problem if the client went on past its hello, else a handshake it abandoned
    /// (killed while connecting, a connection cut mid-handshake), unless its next records show it went on after all.
    private func keysMissing(_ reason: String) {
        // Records the client sent past its hello (read before the ServerHello, or already buffered) show it went on.
        guard !clientWentOn else { return stop(reason) }
        stopped = true
        missingKeys = reason
        heldClientRecords = []
        watchForClientProgress([])
    }

    private func replayHeldClientRecords() {
        let held = heldClientRecords
        heldClientRecords = []
        for record in held where client.phase == .protected {
            process(header: record.header[...], body: record.body[...], end: record.end, in: &client)
        }
    }

    /// A Finished: in TLS 1.3 its sender switches to its application traffic secret.
    private func finished(_ direction: inout TLSDirection) {
        guard let suite, suite.isTLS13, direction.underHandshakeKeys else { return }
        let secret = direction.towardServer ? secrets?.clientTraffic : secrets?.serverTraffic
        guard let secret, secret.count == suite.hashLength else {
            let label = direction.towardServer ? "CLIENT_TRAFFIC_SECRET_0" : "SERVER_TRAFFIC_SECRET_0"
            return stopDirection(&direction, "no \(label) in the key log for this conversation")
        }
        announce(alpn: nil)
        let keys = KeyDerivation.trafficKeys(secret, suite: suite)
        direction.cipher = RecordCipher(suite: suite, key: keys.key, iv: keys.iv)
        direction.trafficSecret = secret
        direction.underHandshakeKeys = false
    }

    /// A TLS 1.3 KeyUpdate: its sender's next records are under the next generation of its traffic secret.
    private func keyUpdate(_ direction: inout TLSDirection) {
        guard let suite, suite.isTLS13, let secret = direction.trafficSecret else { return }
        let next = KeyDerivation.nextTrafficSecret(secret, suite: suite)
        let keys = KeyDerivation.trafficKeys(next, suite: suite)
        direction.cipher = RecordCipher(suite: suite, key: keys.key, iv: keys.iv)
        direction.trafficSecret = next
    }

    private func announce(alpn: String?) {
        guard !announced, let suite else { return }
        announced = true
        outputs.append(.note(.negotiated(alpn: alpn, version: suite.isTLS13 ? "TLS 1.3" : "TLS 1.2", suite: suite.name)))
    }

    /// With no keys: the client's records after its ClientHello. Any but a ChangeCipherSpec or a plaintext alert (a TLS
    /// 1.2 key exchange, a TLS 1.3 Finished, application data) means the handshake went on without keys in the log: a
    /// problem.
    private func watchForClientProgress(_ bytes: [UInt8]) {
        guard let reason = missingKeys else { return }
        client.buffer += bytes
        while let record = client.nextRecord() {
            guard (20...21).contains(record.header[record.header.startIndex]) else {
                missingKeys = nil
                stopped = false
                return stop(reason)
            }
        }
        if let length = client.declaredLength, length > Self.largestRecord {
            missingKeys = nil
            stopped = false
            return stop(reason)
        }
        client.compact()
    }

    // MARK: - Problems

    private func stop(_ reason: String) {
        guard !stopped else { return }
        stopped = true  // both directions' loops check it (a direction may be the one being changed now)
        hadProblem = true
        outputs.append(.note(.problem("TLS \(name): \(reason)")))
    }

    private func stopDirection(_ direction: inout TLSDirection, _ reason: String) {
        guard direction.phase != .stopped else { return }
        direction.phase = .stopped
        hadProblem = true
        let way = direction.towardServer ? "client → server" : "server → client"
        outputs.append(.note(.problem("TLS \(name), \(way): \(reason); the rest of this direction is not decrypted")))
    }
}
