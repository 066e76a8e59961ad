import ChaosCore
import Testing

@testable import ChaosProxy

/// The relay's rules on their own, without sockets: what each event does in each state.
@Suite("Relay state machine")
struct RelayStateMachineTests {
    typealias Machine = RelayStateMachine
    typealias Action = RelayStateMachine.Action

    /// Everything that can happen to a connection.
    enum Event: CaseIterable, Sendable {
        case connected, connectFailed, pendingClient, pendingServer, drainedClient, drainedServer
        case finClient, finServer, resetClient, errorServer, closedClient, closedServer
        case cutReset, cutClose, cutClientOnly, cutServerOnly, lingerExpired, terminate
        case fullServer, acceptsServer, settledClient, settledServer

        func apply(to machine: inout Machine) -> [Action] {
            switch self {
            case .connected: machine.connected()
            case .connectFailed: machine.connectFailed()
            case .pendingClient: machine.pendingChanged(.client, hasPending: true)
            case .pendingServer: machine.pendingChanged(.server, hasPending: true)
            case .drainedClient: machine.pendingChanged(.client, hasPending: false)
            case .drainedServer: machine.pendingChanged(.server, hasPending: false)
            case .finClient: machine.receivedFIN(.client)
            case .finServer: machine.receivedFIN(.server)
            case .resetClient: machine.failed(.client, reset: true)
            case .errorServer: machine.failed(.server, reset: false)
            case .closedClient: machine.closed(.client)
            case .closedServer: machine.closed(.server)
            case .cutReset: machine.cut(.reset, linger: .seconds(Int64(30)))
            case .cutClose: machine.cut(.close, linger: .seconds(Int64(30)))
            case .cutClientOnly: machine.cut(.clientOnly, linger: .seconds(Int64(30)))
            case .cutServerOnly: machine.cut(.serverOnly, linger: .seconds(Int64(30)))
            case .lingerExpired: machine.lingerExpired()
            case .terminate: machine.terminate()
            case .fullServer: machine.acceptsChanged(.server, accepts: false)
            case .acceptsServer: machine.acceptsChanged(.server, accepts: true)
            case .settledClient: machine.acknowledgementsSettled(.client)
            case .settledServer: machine.acknowledgementsSettled(.server)
            }
        }
    }

    static func run(_ events: [Event], on start: Machine = Machine()) -> (Machine, [Action]) {
        var machine = start
        var actions: [Action] = []
        for event in events { actions += event.apply(to: &machine) }
        return (machine, actions)
    }

    // MARK: the table

    struct Row: Sendable, CustomStringConvertible {
        let given: [Event]
        let when: Event
        let then: [Action]
        var description: String { "given \(given), when \(when)" }
    }

    static let rows: [Row] = [
        // Connecting.
        Row(given: [], when: .connected, then: []),
        Row(given: [], when: .connectFailed, then: [.recordUpstreamFailure, .close(.server), .finish, .reset(.client)]),
        Row(given: [.connected], when: .connectFailed, then: []),
        Row(given: [], when: .terminate, then: [.close(.server), .finish, .reset(.client)]),
        Row(given: [], when: .finClient, then: []),
        Row(given: [], when: .cutReset, then: []),
        // A FIN is passed on once what came before it was written.
        Row(given: [.connected], when: .finClient, then: [.recordClose(.client, .fin, beforeReset: false), .sendFIN(.server)]),
        Row(given: [.connected, .pendingServer], when: .finClient, then: [.recordClose(.client, .fin, beforeReset: false)]),
        Row(given: [.connected, .pendingServer, .finClient], when: .drainedServer, then: [.sendFIN(.server)]),
        Row(given: [.connected, .finClient], when: .finClient, then: []),
        // The last FIN of a leg (its peer sent FIN) waits for its peer's acknowledgements; after the last
        // FIN of both, both legs close.
        Row(
            given: [.connected, .finClient],
            when: .finServer,
            then: [.recordClose(.server, .fin, beforeReset: false), .awaitAcknowledgements(.client)]
        ),
        Row(given: [.connected, .finClient, .finServer], when: .settledClient, then: [.sendFIN(.client), .closeInOrder]),
        Row(given: [.connected, .finClient, .finServer, .settledClient], when: .settledClient, then: []),
        Row(given: [.connected, .finClient], when: .settledServer, then: []),
        Row(given: [.connected, .pendingClient, .finClient, .finServer], when: .drainedClient, then: [.awaitAcknowledgements(.client)]),
        Row(given: [.connected, .finClient, .finServer, .cutClose], when: .settledClient, then: []),
        Row(
            given: [.connected, .finClient, .finServer],
            when: .cutClose,
            then: [.countCut, .discard(.client), .sendFIN(.client), .close(.client), .discard(.server), .close(.server), .finish]
        ),
        // A leg whose peer's FIN was read closes while our FIN waits for its acknowledgements: NIO closed it on a
        // reset it did not report (its peer closed its socket, and answered what came after with a RST).
        Row(
            given: [.connected, .finClient, .finServer],
            when: .closedClient,
            then: [.recordClose(.client, .reset, beforeReset: false), .close(.client), .close(.server), .finish]
        ),
        Row(given: [.connected, .finClient, .finServer, .closedClient], when: .closedServer, then: []),
        Row(
            given: [.connected, .finServer],
            when: .closedServer,
            then: [
                .recordClose(.server, .reset, beforeReset: false), .close(.server), .recordClose(.client, .reset, beforeReset: true), .reset(.client),
                .finish,
            ]
        ),
        // NIO folds a peer's FIN into the closure.
        Row(
            given: [.connected],
            when: .closedClient,
            then: [.recordClose(.client, .fin, beforeReset: false), .sendFIN(.server)]
        ),
        // A reset is passed on as a reset; an error too.
        Row(
            given: [.connected],
            when: .resetClient,
            then: [
                .recordClose(.client, .reset, beforeReset: false), .close(.client),
                .recordClose(.server, .reset, beforeReset: true), .reset(.server), .finish,
            ]
        ),
        Row(
            given: [.connected],
            when: .errorServer,
            then: [
                .recordClose(.server, .error, beforeReset: false), .close(.server),
                .recordClose(.client, .reset, beforeReset: true), .reset(.client), .finish,
            ]
        ),
        // …unless the other leg had finished both ways: then it is closed in order.
        Row(
            given: [.connected, .finClient, .finServer, .settledClient],
            when: .errorServer,
            then: [.close(.server), .close(.client), .finish]
        ),
        // (a leg still waiting to send its last FIN had not finished: it is reset, and that reset is recorded after its
        // peer's FIN, as the wire shows it: its peer's TCP drops what its application had not read)
        Row(
            given: [.connected, .finClient, .finServer],
            when: .errorServer,
            then: [.close(.server), .recordClose(.client, .reset, beforeReset: true), .reset(.client), .finish]
        ),
        // A peer's FIN, then its partner's reset passed on to it; then a fault's reset after a peer's FIN.
        Row(
            given: [.connected, .finServer],
            when: .resetClient,
            then: [
                .recordClose(.client, .reset, beforeReset: false), .close(.client),
                .recordClose(.server, .reset, beforeReset: true), .reset(.server), .finish,
            ]
        ),
        Row(
            given: [.connected, .finServer],
            when: .cutReset,
            then: [
                .countCut, .recordClose(.client, .resetByFault, beforeReset: true), .discard(.client), .reset(.client),
                .recordClose(.server, .resetByFault, beforeReset: true), .discard(.server), .reset(.server), .finish,
            ]
        ),
        // Backpressure: a full leg stops reads from its partner; accepting again resumes them.
        Row(given: [.connected], when: .fullServer, then: []),
        Row(given: [.connected, .fullServer], when: .acceptsServer, then: [.resumeReading(.client)]),
        Row(given: [.connected], when: .acceptsServer, then: []),
        Row(given: [.connected, .fullServer, .finClient], when: .acceptsServer, then: []),
        Row(given: [.connected, .fullServer, .cutClientOnly], when: .acceptsServer, then: []),
        // The cuts.
        Row(
            given: [.connected],
            when: .cutReset,
            then: [
                .countCut, .recordClose(.client, .resetByFault, beforeReset: true), .discard(.client), .reset(.client),
                .recordClose(.server, .resetByFault, beforeReset: true), .discard(.server), .reset(.server), .finish,
            ]
        ),
        // A FIN cut records each leg's end when its peer answers: what the peer sends until then is recorded as read.
        Row(
            given: [.connected],
            when: .cutClose,
            then: [
                .countCut, .discard(.client), .sendFIN(.client), .discard(.server), .sendFIN(.server),
                .scheduleLinger(.seconds(Int64(5))),
            ]
        ),
        Row(
            given: [.connected, .cutClose],
            when: .finClient,
            then: [.recordClose(.client, .cutByFault, beforeReset: false), .close(.client)]
        ),
        // A peer that answers a FIN cut with a RST (its socket closed with bytes unread): its reset is recorded too.
        Row(
            given: [.connected, .cutClose],
            when: .resetClient,
            then: [
                .recordClose(.client, .cutByFault, beforeReset: false), .recordClose(.client, .reset, beforeReset: false),
                .close(.client),
            ]
        ),
        Row(given: [.connected, .cutClose], when: .errorServer, then: [.recordClose(.server, .cutByFault, beforeReset: false), .close(.server)]),
        Row(given: [.connected, .finClient, .cutClose], when: .resetClient, then: []),
        // A peer that answers with a RST after its own FIN (s55q2: a grpcio server sent GOAWAY and its FIN, then met
        // the bytes held for it with a RST): its reset is recorded after its FIN, as a capture of the leg sees it.
        Row(
            given: [.connected, .finClient],
            when: .resetClient,
            then: [
                .recordClose(.client, .reset, beforeReset: false), .close(.client), .recordClose(.server, .reset, beforeReset: true),
                .reset(.server), .finish,
            ]
        ),
        Row(
            given: [.connected, .cutClose, .finClient],
            when: .lingerExpired,
            then: [.recordClose(.server, .cutByFault, beforeReset: false), .discard(.server), .reset(.server), .finish]
        ),
        Row(
            given: [.connected],
            when: .cutClientOnly,
            then: [
                .countCut, .recordClose(.client, .resetByFault, beforeReset: true), .discard(.client), .reset(.client),
                .discard(.server), .scheduleLinger(.seconds(Int64(30))),
            ]
        ),
        Row(
            given: [.connected],
            when: .cutServerOnly,
            then: [
                .countCut, .recordClose(.server, .resetByFault, beforeReset: true), .discard(.server), .reset(.server),
                .discard(.client), .scheduleLinger(.seconds(Int64(30))),
            ]
        ),
        // A half-open leg stays silent when its peer sends FIN, until the linger resets it.
        Row(given: [.connected, .cutClientOnly], when: .finServer, then: [.recordClose(.server, .fin, beforeReset: false)]),
        Row(
            given: [.connected, .cutClientOnly],
            when: .lingerExpired,
            then: [.recordClose(.server, .resetByFault, beforeReset: true), .discard(.server), .reset(.server), .finish]
        ),
        Row(given: [.connected, .cutClientOnly], when: .cutReset, then: []),
        Row(
            given: [.connected, .cutClientOnly],
            when: .terminate,
            then: [.cancelLinger, .recordClose(.server, .resetByFault, beforeReset: true), .discard(.server), .reset(.server), .finish]
        ),
        // Nothing passes after a cut: no FIN is passed on.
        Row(given: [.connected, .cutClientOnly], when: .drainedClient, then: []),
        // Stopping.
        Row(
            given: [.connected],
            when: .terminate,
            then: [
                .recordClose(.client, .reset, beforeReset: true), .discard(.client), .reset(.client),
                .recordClose(.server, .reset, beforeReset: true), .discard(.server), .reset(.server), .finish,
            ]
        ),
        Row(given: [.connected, .resetClient], when: .terminate, then: []),
        Row(given: [.connected, .resetClient], when: .lingerExpired, then: []),
    ]

    @Test("each event in each state does what the relay rules say", arguments: rows)
    func table(row: Row) {
        let (before, _) = Self.run(row.given)
        var machine = before
        #expect(row.when.apply(to: &machine) == row.then)
    }

    @Test("a leg is read only while its partner accepts (bytes held for the partner do not stop it); a cut connection only to drop")
    func reads() {
        var machine = Machine(connected: true)
        #expect(machine.mayRead(.client))
        _ = machine.acceptsChanged(.server, accepts: false)
        #expect(!machine.mayRead(.client))
        #expect(machine.mayRead(.server), "each direction has its own backpressure")
        #expect(machine.acceptsChanged(.server, accepts: true) == [.resumeReading(.client)])
        _ = machine.pendingChanged(.server, hasPending: true)
        #expect(machine.mayRead(.client), "a shaper holding bytes for the server is not full")
        _ = machine.acceptsChanged(.server, accepts: false)
        _ = machine.acceptsChanged(.client, accepts: false)
        _ = machine.cut(.clientOnly, linger: .zero)
        #expect(!machine.mayRead(.client), "the reset leg is closed")
        #expect(machine.mayRead(.server), "the lingering leg is read to drop, whoever is full")
        _ = machine.receivedFIN(.server)
        #expect(!machine.mayRead(.server), "nothing is read after its FIN")
    }

    @Test(
        "what a cut leg reads is recorded until its end is: a FIN cut's legs until their peers answer, a one-sided cut's half-open leg until its linger, a reset leg never"
    )
    func droppedReadsRecordedUntilTheEnd() {
        var finCut = Machine(connected: true)
        _ = finCut.cut(.close, linger: .zero)
        #expect(finCut.recordsDroppedReads(.client) && finCut.recordsDroppedReads(.server))
        #expect(finCut.receivedFIN(.client) == [.recordClose(.client, .cutByFault, beforeReset: false), .close(.client)])
        #expect(!finCut.recordsDroppedReads(.client), "its end is recorded: nothing after it")
        #expect(finCut.recordsDroppedReads(.server), "the other peer has not answered yet")

        var oneSided = Machine(connected: true)
        _ = oneSided.cut(.clientOnly, linger: .seconds(Int64(1)))
        #expect(!oneSided.recordsDroppedReads(.client), "the reset leg")
        #expect(oneSided.recordsDroppedReads(.server), "the half-open leg: its peer's TCP is still answered")
        _ = oneSided.lingerExpired()
        #expect(!oneSided.recordsDroppedReads(.server))

        var reset = Machine(connected: true)
        _ = reset.cut(.reset, linger: .zero)
        #expect(!reset.recordsDroppedReads(.client) && !reset.recordsDroppedReads(.server))

        let relaying = Machine(connected: true)
        #expect(!relaying.recordsDroppedReads(.client), "a leg that is not cut records what it relays, not what it drops")
    }

    @Test(
        "in every state reached by three events (and 20,000 seeded longer histories), every event keeps the rules: each close recorded and performed at most once, both legs closed, one finish, nothing after it"
    )
    func everyEventInEveryState() {
        var histories: [[Event]] = [[]]
        for _ in 0..<3 { histories = histories.flatMap { history in Event.allCases.map { history + [$0] } } }
        var random = SeededGenerator(seed: 14)
        for _ in 0..<20_000 {
            histories.append((0..<10).map { _ in Event.allCases[Int(random.next(upperBound: UInt64(Event.allCases.count)))] })
        }
        // Each history is followed by every event once more (terminate among them, so every one ends).
        for history in histories {
            var machine = Machine()
            var actions: [Action] = []
            for event in history + Event.allCases { actions += event.apply(to: &machine) }
            var broken: [String] = []
            for side in Side.allCases {
                let records = actions.compactMap { if case .recordClose(side, let kind, _) = $0 { kind } else { nil } }
                // A FIN cut's close, or its peer's own FIN, may be followed by its peer's answering reset, and its
                // peer's FIN by the proxy's reset (a fault's, or the stop's), and by nothing else.
                if records.count > 1, records != [.cutByFault, .reset], records != [.fin, .reset], records != [.fin, .resetByFault] {
                    broken.append("\(side) recorded \(records)")
                }
                let closes = actions.filter { $0 == .reset(side) || $0 == .close(side) }.count
                if closes > 1 { broken.append("\(side) closed \(closes) times") }
                if !machine.leg(side).closed { broken.append("\(side) never closed") }
            }
            if actions.filter({ $0 == .finish }).count != 1 { broken.append("not finished exactly once") }
            if let finish = actions.firstIndex(of: .finish) {
                // Only the client's reset after a failed connect follows the finish (it is forgotten first).
                let after = actions[(finish + 1)...].filter { $0 != .reset(.client) }
                if !after.isEmpty { broken.append("\(after) after finish") }
            }
            if machine.phase != .finished { broken.append("phase \(machine.phase)") }
            #expect(broken.isEmpty, "\(history): \(broken)")
        }
    }
}
