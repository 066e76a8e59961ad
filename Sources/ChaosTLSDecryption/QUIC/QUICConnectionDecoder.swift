/// Which end of a QUIC connection sent a datagram.
package enum QUICSender: Int, CaseIterable, Hashable, Sendable {
    case client, server

    package var other: QUICSender { self == .client ? .server : .client }
}

/// One packet of a connection, opened: who sent it, its kind and number, and its frames.
package struct QUICPacketRecord: Equatable, Sendable {
    package var sender: QUICSender
    package var type: QUICPacketType
    package var number: UInt64
    package var frames: [QUICFrame]
    /// Its size on the wire.
    package var size: Int
    /// A packet opened late (its keys came after it): the datagram it came in, which may have been passed on already
    /// (nil: the datagram being decoded).
    package var lateFrom: [UInt8]? = nil
}

/// Opens the packets of one QUIC connection as both ends send them (RFC 9001): the Initial keys from the client's
/// first Destination Connection ID, the handshake and 1-RTT keys from the key log's secrets for the ClientHello's
/// random (with the cipher suite the ServerHello chose), key updates as the Key Phase bit flips, and the connection IDs
/// each end issues (a short header's Destination Connection ID has no length on the wire).
package struct QUICConnectionDecoder {
    /// The secrets logged for a ClientHello random (a live audit reads the key log again when they are not there yet).
    package typealias SecretsLookup = ([UInt8]) -> KeyLog.Secrets?

    private let secrets: SecretsLookup
    package private(set) var version: QUICVersion?
    /// The Destination Connection ID the Initial keys come from (the client's first, or the one a Retry gave it).
    package private(set) var initialDestination: [UInt8]?
    /// The ClientHello's random, once its CRYPTO frames are in.
    package private(set) var clientRandom: [UInt8]?
    /// The cipher suite the ServerHello chose.
    package private(set) var suiteName: String?
    /// The connection IDs each end issued (its Source Connection ID, its NEW_CONNECTION_ID frames): what the other
    /// end sends to.
    package private(set) var issuedIDs: [QUICSender: Set<[UInt8]>] = [.client: [], .server: []]

    private var keys: [QUICSender: [QUICPacketSpace: QUICPacketKeys]] = [.client: [:], .server: [:]]
    private var largest: [QUICSender: [QUICPacketSpace: UInt64]] = [.client: [:], .server: [:]]
    private var handshake: [QUICSender: QUICCryptoStream] = [.client: QUICCryptoStream(), .server: QUICCryptoStream()]
    private var suite: CipherSuite?
    /// The 1-RTT keys of each end's phase before its last key update.
    private var retiredKeys: [QUICSender: QUICPacketKeys] = [:]
    /// Handshake and 1-RTT packets that came before their keys (a key log its stack is still writing, as a live run
    /// reads it): opened once the keys come, the oldest ``awaitingLimit`` kept.
    private var awaiting: [(packet: QUICRawPacket, sender: QUICSender, datagram: [UInt8])] = []
    static let awaitingLimit = 256

    /// Packets still waiting for their keys (unopened, if the keys never come).
    package var awaitingKeys: Int { awaiting.count }
    private var handshakeSecretsInstalled = false

    /// Why a packet could not be opened.
    package enum Unopened: Error, Equatable, CustomStringConvertible {
        case noKeys(QUICPacketType)
        case undecryptable(QUICPacketType)
        case malformed(String)

        package var description: String {
            switch self {
            case .noKeys(let type): "a \(type.rawValue) packet before its keys were known (no key log secrets for this connection yet)"
            case .undecryptable(let type): "a \(type.rawValue) packet that did not open under its keys"
            case .malformed(let why): why
            }
        }
    }

    /// A decoder that asks `secrets` for a connection's TLS secrets once it knows its ClientHello's random.
    package init(secrets: @escaping SecretsLookup) {
        self.secrets = secrets
    }

    /// A decoder over a key log read in full.
    package init(keyLog: KeyLog) {
        self.init { keyLog.secrets(for: $0) }
    }

    /// Opens the packets of a datagram `sender` sent: those it could open, and why each other one could not.
    package mutating func decode(datagram: ArraySlice<UInt8>, from sender: QUICSender) -> (packets: [QUICPacketRecord], unopened: [Unopened]) {
        let receiverIDs = issuedIDs[sender.other] ?? []
        let raw: [QUICRawPacket]
        do {
            raw = try QUICDatagram.packets(in: datagram) { bytes in
                receiverIDs.lazy.filter { bytes.starts(with: $0) }.map(\.count).max()
            }
        } catch {
            return ([], [.malformed("\(error)")])
        }
        var opened: [QUICPacketRecord] = []
        var unopened: [Unopened] = []
        installSecrets()
        for packet in raw {
            do {
                if let record = try open(packet, from: sender) { opened.append(record) }
            } catch Unopened.noKeys(let type) where type != .initial && awaiting.count < Self.awaitingLimit {
                awaiting.append((packet, sender, Array(datagram)))
            } catch let failure as Unopened {
                unopened.append(failure)
            } catch {
                unopened.append(.malformed("\(error)"))
            }
        }
        if !awaiting.isEmpty { openAwaiting(into: &opened, &unopened) }
        return (opened, unopened)
    }

    /// Opens the packets that waited, whose keys are now known.
    private mutating func openAwaiting(into opened: inout [QUICPacketRecord], _ unopened: inout [Unopened]) {
        let waiting = awaiting
        awaiting = []
        for (packet, sender, datagram) in waiting {
            guard let space = packet.type.space, keys[sender]?[space] != nil else {
                awaiting.append((packet, sender, datagram))
                continue
            }
            do {
                if var record = try open(packet, from: sender) {
                    record.lateFrom = datagram
                    opened.append(record)
                }
            } catch let failure as Unopened {
                unopened.append(failure)
            } catch {
                unopened.append(.malformed("\(error)"))
            }
        }
    }

    private mutating func open(_ packet: QUICRawPacket, from sender: QUICSender) throws -> QUICPacketRecord? {
        switch packet.type {
        case .versionNegotiation:
            return nil
        case .retry:
            // The client's next Initial goes to the Retry's Source Connection ID, and its keys come from it.
            if sender == .server { initialDestination = nil }
            return nil
        case .initial, .handshake, .zeroRTT:
            if let number = packet.version, version == nil { version = QUICVersion.known(number) }
            issuedIDs[sender, default: []].insert(packet.source)  // empty too: an end may use zero-length IDs
            // The Initial keys come from the client's first Destination Connection ID (or the one a Retry gave it),
            // not from the server's ID it sends its later Initials to.
            if packet.type == .initial, sender == .client, initialDestination == nil, let version {
                initialDestination = packet.destination
                let initial = QUICPacketKeys.initial(destination: packet.destination, version: version)
                keys[.client, default: [:]][.initial] = initial.client
                keys[.server, default: [:]][.initial] = initial.server
            }
        case .oneRTT:
            break
        }
        guard let space = packet.type.space else { return nil }
        guard let current = keys[sender]?[space] else { throw Unopened.noKeys(packet.type) }
        let known = largest[sender]?[space]
        var result: QUICOpenedPacket
        do {
            result = try packet.open(with: current, largest: known)
        } catch QUICPacketKeys.Failure.authentication where packet.type == .oneRTT {
            // A packet of the phase before (reordered past the update), or the Key Phase flipped: the next keys open
            // it, and stay.
            if let retired = retiredKeys[sender], let late = try? packet.open(with: retired, largest: known) {
                result = late
            } else {
                let next = current.updated()
                guard let updated = try? packet.open(with: next, largest: known) else { throw Unopened.undecryptable(packet.type) }
                retiredKeys[sender] = current
                keys[sender, default: [:]][space] = next
                result = updated
            }
        } catch QUICPacketKeys.Failure.authentication {
            throw Unopened.undecryptable(packet.type)
        }
        largest[sender, default: [:]][space] = max(known ?? 0, result.number)
        let frames = try QUICFrame.parse(result.payload)
        for frame in frames {
            switch frame {
            case .crypto(let offset, let data) where space != .application:
                handshake[sender]?.add(offset: offset, data: data)
            case .newConnectionID(_, _, let id, _):
                issuedIDs[sender, default: []].insert(id)
            default:
                break
            }
        }
        learnFromHandshake()
        return QUICPacketRecord(sender: sender, type: packet.type, number: result.number, frames: frames, size: packet.bytes.count)
    }

    /// The ClientHello's random and the ServerHello's suite, once their CRYPTO frames are in; then the keys.
    private mutating func learnFromHandshake() {
        if clientRandom == nil, let body = handshake[.client]?.firstMessage(type: 1) {
            clientRandom = ClientHelloFacts(body: body[...])?.random
        }
        if suite == nil, let body = handshake[.server]?.firstMessage(type: 2), let facts = ServerHelloFacts(body: body[...]) {
            suite = CipherSuite.quic(facts.suite)
            suiteName = CipherSuite.describe(facts.suite)
        }
        installSecrets()
    }

    /// The handshake and 1-RTT keys of the key log's secrets (asked again until they are there).
    private mutating func installSecrets() {
        guard !handshakeSecretsInstalled, let clientRandom, let suite, let version, let logged = secrets(clientRandom) else { return }
        let wanted: [(QUICSender, QUICPacketSpace, [UInt8]?)] = [
            (.client, .handshake, logged.clientHandshake), (.server, .handshake, logged.serverHandshake),
            (.client, .application, logged.clientTraffic), (.server, .application, logged.serverTraffic),
        ]
        for (sender, space, secret) in wanted {
            guard let secret, keys[sender]?[space] == nil else { continue }
            keys[sender, default: [:]][space] = QUICPacketKeys(secret: secret, suite: suite, version: version)
        }
        handshakeSecretsInstalled = wanted.allSatisfy { keys[$0.0]?[$0.1] != nil }
    }

    /// Whether the packets of `space` from `sender` can be opened now.
    package func hasKeys(_ sender: QUICSender, _ space: QUICPacketSpace) -> Bool { keys[sender]?[space] != nil }
}

/// The CRYPTO stream of one end, as far as the decoder needs it: its first handshake messages, reassembled by offset
/// from frames that may come out of order or twice, bounded.
struct QUICCryptoStream: Sendable {
    /// What is contiguous from offset 0.
    private var bytes: [UInt8] = []
    /// Pieces past a gap, by offset.
    private var pending: [UInt64: [UInt8]] = [:]
    private var pendingBytes = 0
    /// A ClientHello with post-quantum key shares is a few KB; nothing a handshake needs is beyond this.
    static let limit = 64 * 1024

    mutating func add(offset: UInt64, data: [UInt8]) {
        guard offset < UInt64(Self.limit), !data.isEmpty else { return }
        let end = offset + UInt64(data.count)
        if end <= UInt64(bytes.count) { return }
        if offset <= UInt64(bytes.count) {
            bytes += data.dropFirst(bytes.count - Int(offset))
            while let next = pending.keys.filter({ $0 <= UInt64(bytes.count) }).min(), let piece = pending.removeValue(forKey: next) {
                pendingBytes -= piece.count
                let pieceEnd = next + UInt64(piece.count)
                if pieceEnd > UInt64(bytes.count) { bytes += piece.dropFirst(bytes.count - Int(next)) }
            }
            if bytes.count > Self.limit { bytes.removeLast(bytes.count - Self.limit) }
        } else if pendingBytes + data.count <= Self.limit {
            if let held = pending[offset], held.count >= data.count { return }
            pendingBytes += data.count - (pending[offset]?.count ?? 0)
            pending[offset] = data
        }
    }

    /// The body of the first handshake message, when it is whole and of `type`.
    func firstMessage(type: UInt8) -> [UInt8]? {
        guard bytes.count >= 4, bytes[0] == type else { return nil }
        let length = Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3])
        guard bytes.count >= 4 + length else { return nil }
        return Array(bytes[4..<(4 + length)])
    }
}
