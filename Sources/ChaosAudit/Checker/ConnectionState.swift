import ChaosCore
import ChaosProtocols

/// The place of a connection in the order the audit first saw connections (``ConnectionState/order``), from 1.
typealias ConnectionOrder = UInt64

/// The audit's view of one live connection: a leg decoder per direction and role, and the streams it carries.
/// Dropped when both legs have closed.
final class ConnectionState {
    let id: ConnectionID
    /// Its place among the connections in the order the audit first saw them (their opening, as a rule): the audit's
    /// "newer connection" (a consumer that moved on, a resume point given since). Not its ``id``: a fleet's merge
    /// numbers each agent's connections apart (``FleetMerge``), so a later connection through one agent can have a
    /// lower number than an earlier one through another.
    let order: ConnectionOrder
    /// Indexed by ``pipeIndex(_:_:)``: sent/delivered × upstream/downstream.
    let pipes: [FramePipe]
    /// Per direction (upstream 0, downstream 1): ledger index → the stream's state on this connection.
    var streams: [[Int: ConnectionStream]] = [[:], [:]]
    /// Legs closed so far.
    var clientClosed = false
    var serverClosed = false
    var cutByFault = false
    /// When the proxy accepted it (nil: its opening was not seen, as in a capture that began mid-connection).
    var openedAt: Int64?
    /// No proxy between the ends (see ``ConnectionEndpoints/isDirect``).
    var direct = false
    /// The proxy it went through (its name, or `capture`).
    var proxy = ""
    /// The sides to which nothing more can be delivered.
    var deliveriesEnded: Set<Side> = []
    /// The sides that began to end their session in their protocol (a close frame read from them): what their TCP
    /// takes from then on is taken after close (``ProtocolEvent/closing``).
    var closingSides: Set<Side> = []
    /// The sides whose close abandoned the work their protocol had open (a FIN, theirs or a fault's, with a call open):
    /// what their TCP acknowledges from then on is in doubt, as what it had taken past their last ack is.
    var abandonedBy: Set<Side> = []
    /// A framing or decoding problem was already reported for this connection.
    var reportedFraming = false
    var reportedUndecodable = false
    var reportedUnconfirmed = false
    var reportedProtocol = false
    var reportedOversized = false
    /// The directions whose bytes stopped parsing (a protocol error is counted once per direction).
    var failedDirections: Set<Direction> = []
    /// What the connection's legs share (its protocol's handshake, its calls), from the protocol's plug-in.
    let session: any ProtocolSession
    /// Per direction (upstream 0, downstream 1): the stream named by the upgrade request (`header:` / `query:`).
    var handshakeStreams: [[UInt8]?] = [nil, nil]
    /// `fanout:`: the client this connection delivers to (named by its handshake or its own first message); nil: not
    /// named yet.
    var fanoutReceiver: String?
    /// By family (a plug-in's codes), per direction (upstream 0, downstream 1): codes read from the sender, and, for a
    /// family the proxy may write too, their written copies matched so far.
    var codesRead: [String: [Int]] = [:]
    var codesRelayed: [String: [Int]] = [:]
    /// PINGs read and not answered yet (opaque bytes, when), oldest first, at most ``pendingPingLimit``.
    var pendingPings: [(opaque: UInt64, at: Int64)] = []
    static let pendingPingLimit = 8
    /// Whether the connection's end was judged (``AuditEngine/connectionEnded(_:)``).
    var endJudged = false
    /// Per direction (upstream 0, downstream 1): every read so far was written whole at once, and audited as one
    /// relayed pair (``AuditEngine/relayed(_:_:)``): the delivered pipe's decoder was skipped and stands behind.
    var lockstep = [false, false]

    init(id: ConnectionID, order: ConnectionOrder, layer: ProtocolLayer) {
        self.id = id
        self.order = order
        let session = layer.framer.makeSession()
        self.session = session
        var pipes: [FramePipe] = []
        for role in [FramePipe.Role.sent, .delivered] {
            for direction in [Direction.upstream, .downstream] {
                let decoder = session.makeDecoder(direction, cap: layer.cap)
                pipes.append(FramePipe(role: role, direction: direction, decoder: decoder))
            }
        }
        self.pipes = pipes
    }

    @inline(__always)
    static func pipeIndex(_ role: FramePipe.Role, _ direction: Direction) -> Int {
        (role == .sent ? 0 : 2) + (direction == .upstream ? 0 : 1)
    }

    @inline(__always)
    func pipe(_ role: FramePipe.Role, _ direction: Direction) -> FramePipe { pipes[Self.pipeIndex(role, direction)] }

    var fullyClosed: Bool { clientClosed && serverClosed }
}

/// One byte stream of a connection: the bytes read from a producer (`sent`) or written to a consumer
/// (`delivered`) in one direction, with its own decoder (reads and writes are cut at different places).
/// A `delivered` pipe also holds the messages written but not yet acknowledged by the consumer's TCP.
final class FramePipe {
    enum Role { case sent, delivered }

    let role: Role
    let direction: Direction
    let decoder: any LegDecoder
    /// The last stream name seen on this pipe and its state: most connections carry one stream.
    var cachedName: [UInt8] = []
    var cachedDefault = false
    var cached: ConnectionStream?
    /// The RPC call whose stream (named by its metadata or the call itself) was last looked up on this pipe, while
    /// ``cached`` is still that stream: the call's next messages skip the lookup.
    var cachedCall: RPCCall?
    /// The delivery contract the messages read on this pipe carry from now on (``ProtocolEvent/contract(_:)``).
    var contract: DeliveryContract?
    /// Whether the next message read on this pipe is retained state sent again (``ProtocolEvent/retained``).
    var retained = false
    /// Bytes that went through this pipe so far.
    var offset: Int64 = 0
    /// How many of them the consumer's TCP acknowledged (`delivered` pipes).
    var acknowledged: Int64 = 0
    /// Messages written and not yet acknowledged, oldest first (`delivered` pipes).
    var pending = PendingDeliveries()
    /// The last ack the consumer of this pipe wrote on this connection, per stream it acknowledges (by ledger index;
    /// `delivered` pipes): an ack naming a message still pending says the consumer read it.
    var statedAcks: [Int: Int64] = [:]
    /// What was read from messages not yet written (`sent` pipes, when written bytes copy read ones).
    var readCopies = ReadCopies()
    /// Which written bytes are the very bytes read (the last read on a `sent` pipe; the span on a `delivered` one).
    var verbatim = VerbatimWrites()

    init(role: Role, direction: Direction, decoder: any LegDecoder) {
        self.role = role
        self.direction = direction
        self.decoder = decoder
    }
}

extension ConnectionState {
    /// Whether a copy of a `family` code written in direction `slot` is the relayed copy of one read (true: counted
    /// already) rather than the proxy's own.
    func matchWrittenCopy(_ family: String, _ slot: Int) -> Bool {
        let read = codesRead[family]?[slot] ?? 0
        var relayed = codesRelayed[family, default: [0, 0]]
        guard relayed[slot] < read else { return false }
        relayed[slot] += 1
        codesRelayed[family] = relayed
        return true
    }
}
