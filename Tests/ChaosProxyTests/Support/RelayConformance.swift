import ChaosCore

@testable import ChaosProxy

/// What the conformance suite does to one proxied connection from outside: a peer's act, a
/// fault's cut or the proxy stopping. Each maps to one ``RelayStateMachine`` event (bytes to none).
enum WireStep: Sendable, CaseIterable, CustomStringConvertible {
    case clientSends, serverSends, clientFIN, serverFIN, clientReset, serverReset
    case cutReset, cutClose, cutClientOnly, cutServerOnly, terminate

    var description: String {
        switch self {
        case .clientSends: "client sends"
        case .serverSends: "server sends"
        case .clientFIN: "client FIN"
        case .serverFIN: "server FIN"
        case .clientReset: "client RST"
        case .serverReset: "server RST"
        case .cutReset: "cut reset"
        case .cutClose: "cut close"
        case .cutClientOnly: "cut client-only"
        case .cutServerOnly: "cut server-only"
        case .terminate: "proxy stops"
        }
    }

    /// The peer that acts (nil: the proxy acts).
    var actor: Side? {
        switch self {
        case .clientSends, .clientFIN, .clientReset: .client
        case .serverSends, .serverFIN, .serverReset: .server
        default: nil
        }
    }

    /// The disconnect mode of a cut.
    var cutMode: DisconnectMode? {
        switch self {
        case .cutReset: .reset
        case .cutClose: .close
        case .cutClientOnly: .clientOnly
        case .cutServerOnly: .serverOnly
        default: nil
        }
    }

    /// The bytes a peer sends: one letter per side, so what arrives names who sent it.
    static func payload(from side: Side) -> [UInt8] { Array((side == .client ? "c" : "s").utf8) }

    /// Feeds the machine the event this step is (bytes: none); the linger of a cut is long (a
    /// lingering leg stays open for the whole history).
    func apply(to machine: inout RelayStateMachine) -> [RelayStateMachine.Action] {
        switch self {
        case .clientSends, .serverSends: []
        case .clientFIN: machine.receivedFIN(.client)
        case .serverFIN: machine.receivedFIN(.server)
        case .clientReset: machine.failed(.client, reset: true)
        case .serverReset: machine.failed(.server, reset: true)
        case .terminate: machine.terminate()
        default: machine.cut(cutMode!, linger: .seconds(Int64(30)))
        }
    }
}

/// What a peer sees of the connection, and what the proxy recorded of its leg.
struct PeerView: Equatable, Sendable, CustomStringConvertible {
    /// How the stream toward the peer ended, as far as it can tell.
    enum End: Equatable, Sendable {
        /// Nothing yet: the proxy keeps the leg open.
        case open
        /// A FIN (a read returned 0).
        case fin
        /// A reset.
        case reset
        /// The peer reset its socket itself: it sees nothing more.
        case gone
    }

    var received: [UInt8] = []
    var end = End.open
    /// The `closed` event the proxy recorded for this leg, if any.
    var recorded: TrafficEvent.CloseKind?

    var description: String {
        "received \"\(String(decoding: received, as: UTF8.self))\", \(end), recorded \(recorded.map { "\($0)" } ?? "nothing")"
    }
}

/// One event history and the wire outcome that ``RelayStateMachine`` says each step has, for both
/// peers: computed by feeding the machine the steps and reading its actions as what goes on the
/// wire (a peer acknowledges what it is sent at once, so a leg awaiting acknowledgements settles;
/// sockets the relay closes in order are reported closed).
struct ConformanceHistory: Sendable, CustomStringConvertible {
    let steps: [WireStep]
    /// After each step, what each peer (by ``Side/slot``) must see.
    let expected: [[PeerView]]

    var description: String { steps.map(\.description).joined(separator: ", ") }

    init(_ steps: [WireStep]) {
        self.steps = steps
        var machine = RelayStateMachine(connected: true)
        var views = [PeerView(), PeerView()]
        var expected: [[PeerView]] = []
        for step in steps {
            if let actor = step.actor, step == .clientSends || step == .serverSends {
                let receiver = actor.other
                if !machine.isCut, machine.phase == .relaying, !machine.leg(actor).receivedFIN, !machine.leg(receiver).closed {
                    views[receiver.slot].received += WireStep.payload(from: actor)
                }
            }
            // A peer that resets its socket sees nothing more (unless the proxy reset it first).
            if step == .clientReset || step == .serverReset, views[step.actor!.slot].end != .reset {
                views[step.actor!.slot].end = .gone
            }
            var actions = step.apply(to: &machine)
            while !actions.isEmpty {
                let action = actions.removeFirst()
                switch action {
                case .sendFIN(let side) where views[side.slot].end == .open: views[side.slot].end = .fin
                case .reset(let side) where views[side.slot].end != .gone: views[side.slot].end = .reset
                case .recordClose(let side, let kind, _): views[side.slot].recorded = kind
                case .awaitAcknowledgements(let side): actions += machine.acknowledgementsSettled(side)
                // The relay closes both sockets and reports them closed.
                case .closeInOrder: actions += machine.closed(.client) + machine.closed(.server)
                default: break
                }
            }
            expected.append(views)
        }
        self.expected = expected
    }

    /// Whether a peer acts after it reset its socket, or the proxy acts after it stopped: such a
    /// history cannot be played.
    var isPlayable: Bool {
        var gone: Set<Side> = []
        var finished = false
        for step in steps {
            if finished { return false }
            if let actor = step.actor {
                if gone.contains(actor) { return false }
                if step == .clientReset || step == .serverReset { gone.insert(actor) }
            }
            if step == .terminate { finished = true }
        }
        // A FIN once per peer, and no bytes after it.
        for side in Side.allCases {
            let own = steps.filter { $0.actor == side }
            if let fin = own.firstIndex(where: { $0 == .clientFIN || $0 == .serverFIN }),
                own[(fin + 1)...].contains(where: { $0 == .clientFIN || $0 == .serverFIN || $0 == .clientSends || $0 == .serverSends })
            {
                return false
            }
        }
        return true
    }

    /// Every playable history of one or two steps, and the orderly ends of three and four.
    static let all: [ConformanceHistory] = {
        let singles = WireStep.allCases.map { [$0] }
        let pairs = WireStep.allCases.flatMap { first in WireStep.allCases.map { [first, $0] } }
        let longer: [[WireStep]] = [
            [.clientSends, .serverSends, .clientFIN, .serverFIN],
            [.serverSends, .serverFIN, .clientSends, .clientFIN],
            [.clientFIN, .serverSends, .serverFIN],
            [.clientSends, .clientFIN, .cutClose],
            [.serverFIN, .clientFIN, .terminate],
            [.clientSends, .cutClientOnly, .serverSends],
        ]
        return (singles + pairs + longer).map(ConformanceHistory.init).filter(\.isPlayable)
    }()
}
