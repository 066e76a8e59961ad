import ChaosCore
import ChaosTLSDecryption

/// What one TCP flow reports before it is known which connection (and which leg) it is.
enum FlowEvent {
    case data(towardServer: Bool, bytes: [UInt8], time: Int64)
    case fin(fromClient: Bool, time: Int64)
    case reset(fromClient: Bool, time: Int64)
    /// The receiver of the bytes travelling `towardServer` acknowledged the first `bytes` of them.
    case acknowledged(towardServer: Bool, bytes: Int64, time: Int64)
    /// As `acknowledged`, of plaintext written after the receiver ended its TLS session (close_notify).
    case acknowledgedAfterClose(towardServer: Bool, bytes: Int64, time: Int64)
    /// The receiver of the bytes travelling `towardServer` reset the flow without a FIN of its own first, past its
    /// last acknowledgement: it took the first `bytes` of them ahead of its RST, whose acknowledgement number no TCP
    /// counts, and its application may have read them (``TrafficEvent/PathEvent/acknowledgementsCut(_:upTo:)``).
    case acknowledgementsCut(towardServer: Bool, bytes: Int64, time: Int64)
    /// What the flow's TLS decryption learnt.
    case tls(TrafficEvent.TLSNote, time: Int64)
}

/// A flow event held while the flow's role is undecided, with its place in the order events were seen
/// (so that two legs paired late replay interleaved as they happened).
struct HeldEvent {
    let order: Int
    let event: FlowEvent
}

/// Which connection a flow belongs to, and as what.
enum FlowRole {
    /// A possible client leg waiting for its server leg, or a server leg waiting for its payload to
    /// tell which client leg it relays: its events are held.
    case pending
    /// A connection of its own: each payload is both read and written.
    case standalone(ConnectionID)
    /// The client ↔ proxy leg of a paired connection.
    case clientLeg(ConnectionID)
    /// The proxy ↔ server leg of a paired connection.
    case serverLeg(ConnectionID)
}

/// One TCP flow (one 4-tuple, from one SYN): who is client and server, and a reassembler per
/// direction.
final class TCPFlow {
    /// The order in which flows were first seen.
    let serial: Int
    /// The end that opened the flow (or is taken to have).
    let client: WireEndpoint
    /// The end that accepted it.
    let server: WireEndpoint
    /// Whether the client's SYN was seen (only such flows can be paired).
    let openedWithSYN: Bool
    /// The client's initial sequence number, when its SYN was seen.
    let synSequence: UInt32?
    /// The time of the first packet.
    let firstTime: Int64
    /// The time of the latest packet.
    var lastTime: Int64
    /// Client → server bytes.
    var towardServer = StreamReassembler()
    /// Server → client bytes.
    var towardClient = StreamReassembler()
    var role: FlowRole = .pending
    /// Events held while the role is `.pending`.
    var held: [HeldEvent] = []
    /// The first payload bytes each way, recorded while the role is `.pending`.
    var firstBytes = PayloadPrefix()
    /// The payload bytes among `held`.
    var heldBytes = 0
    /// Whether any payload was reported.
    var carriedPayload = false
    /// RST seen, or both FINs reached: later packets (but a new SYN, or an ACK after the FINs) are leftovers.
    var finished = false
    /// It ended with a RST.
    var wasReset = false
    /// Whose FIN was reported first (nil before either): the client's (true) or the server's.
    var firstFINFromClient: Bool?
    /// Whether the flow's counters went into the statistics.
    var counted = false
    /// With a key log: whether the first payload was looked at, and the flow's TLS decryption when it spoke TLS.
    var tlsDecided = false
    var tls: TLSConversation?
    /// The capture loss of the direction whose bytes are being reported, counted before them.
    var lossBeforeData = 0

    init(serial: Int, client: WireEndpoint, server: WireEndpoint, openedWithSYN: Bool, synSequence: UInt32?, time: Int64) {
        self.serial = serial
        self.client = client
        self.server = server
        self.openedWithSYN = openedWithSYN
        self.synSequence = synSequence
        self.firstTime = time
        self.lastTime = time
    }

    /// Whether the role is still undecided.
    var isPending: Bool {
        if case .pending = role { return true }
        return false
    }

    /// Hands out the held events and forgets them and the recorded first bytes (the role is decided).
    func releaseHeld() -> [HeldEvent] {
        let events = held
        held = []
        heldBytes = 0
        firstBytes = PayloadPrefix()
        return events
    }

    /// Adds this flow's reassembly counters to `statistics`, once.
    func count(into statistics: inout CaptureStatistics) {
        guard !counted else { return }
        counted = true
        for stream in [towardServer, towardClient] {
            statistics.retransmittedBytes += stream.retransmittedBytes
            statistics.outOfOrderSegments += stream.outOfOrderSegments
            statistics.captureLossBytes += stream.lossBytes
            statistics.captureLossHoles += stream.lossHoles
        }
        if let tls {
            statistics.tlsConversations += 1
            if !tls.hadProblem, tls.recordsDecrypted > 0 { statistics.tlsDecrypted += 1 }
            if tls.hadProblem { statistics.tlsFailed += 1 }
            if tls.abandonedHandshake { statistics.tlsAbandoned += 1 }
            statistics.tlsRecords += tls.recordsDecrypted
            statistics.tlsPlaintextBytes += tls.plaintextBytes
        }
    }
}
