import ChaosCore
import ChaosProtocols
import ChaosProxy
import Foundation
import NIOHTTP1
import Synchronization

/// chaos's own faults on the API's port, for what Toxiproxy lacks (partition, handoff, refuse, …):
/// `POST /faults` takes one fault as a scenario writes it, `DELETE /faults/N` lifts it.
extension ControlAPI {
    /// How long an API fault lasts when it is not deleted: as long as any run may (its timeline is drawn
    /// lazily, so a fault every millisecond costs no memory ahead of time).
    static let forever = Scenario.longestDuration

    /// The longest a `POST /faults` of a fault that starts now waits for it to hold the live connections.
    static let applyWait = Duration.seconds(10)

    struct FaultList: Encodable {
        struct Entry: Encodable {
            var id: Int
            var fault: String
        }
        var faults: [Entry]
    }

    struct FaultCreated: Encodable {
        var id: Int
        var timeline: [String]
    }

    struct Lifted: Encodable { var lifted: Int }

    func listFaults() -> APIResponse {
        let active = state.withLock { $0.faults.map { FaultList.Entry(id: $0.key, fault: $0.value.rule) } }
        return .json(FaultList(faults: active.sorted { $0.id < $1.id }))
    }

    /// Lifts fault `id`, or every fault when nil.
    func liftFaults(_ id: Int?) async -> APIResponse {
        let tasks = state.withLock { state -> [Task<Void, Never>]? in
            guard let id else {
                defer { state.faults = [:] }
                return state.faults.values.map(\.task)
            }
            return state.faults.removeValue(forKey: id).map { [$0.task] }
        }
        guard let tasks else { return .error("no active fault \(id ?? 0)", status: .notFound) }
        for task in tasks {
            task.cancel()
            await task.value
        }
        return .json(Lifted(lifted: tasks.count))
    }

    /// Draws a fault the way a scenario's are drawn (the same parser, rules and timeline), from the API's
    /// seed forked by the fault's id; its shaping is keyed by that id, apart from the run's own. Its times count
    /// from the proxy's start, as a scenario's do: what ended before the request is skipped, what began before it
    /// and lasts past it applies for the rest. Its marks go to the run's event stream at the run's time.
    func addFault(_ body: String) async -> APIResponse {
        let proxies = state.withLock { $0.servers }
        let specs = proxies.map(\.spec)
        let now = factory.clock.now()
        let rule: FaultRule
        do {
            // An instant fault with neither 'at' nor 'every' happens now (as a toxic does).
            rule = try FaultRule.parse(
                body,
                proxies: specs,
                duration: Self.forever,
                source: "request body",
                instantAt: .nanoseconds(now),
                framings: ProtocolRegistry.catalog
            )
            try rule.checkInvariants(source: "request body", proxies: Set(specs.map(\.name)))
            try rule.checkBegins(within: extras.runLength.map { min($0, Self.forever) } ?? Self.forever, source: "request body")
            if rule.kind.actsOnThePair {
                throw ChaosError.badInput(
                    "request body: a \(rule.kind.rawValue) fault acts on a chaos run's pair (pair.server); the API's faults act on its proxies"
                )
            }
        } catch let error as ChaosError {
            return .error(error.description, status: .badRequest)
        } catch {
            return .error("\(error)", status: .badRequest)
        }
        let id = state.withLock { $0.nextID() }
        var generator = SeededGenerator(seed: seed).fork("api", UInt64(id))
        let timeline = Timeline(rules: [rule], seed: generator.next(), duration: Self.forever)
        let upcoming = timeline.lazy.filter { $0.end.nanoseconds >= now }
        guard let first = upcoming.first(where: { _ in true }) else {
            return .error(
                "request body: the fault is over before it could begin: 'at' counts from the proxy's start, "
                    + "\(ChaosDuration.nanoseconds(now)) ago (leave 'at' out for now)",
                status: .badRequest
            )
        }
        let lines = upcoming.prefix(20).map(Timeline.line)
        let startsNow = first.at.nanoseconds <= now
        let injector = FaultInjector(
            timeline: timeline,
            skippingBefore: now,
            number: id,
            proxies: proxies,
            clock: factory.clock,
            sink: factory.sink,
            tally: faultTally
        )
        // Made under the lock, so that a fault that is over at once (a disconnect) is kept before it is let go:
        // a fault whose timeline has ended is no longer active (GET /faults, /metrics).
        state.withLock { state in
            let task = Task { [weak self] in
                await injector.run()
                self?.state.withLock { _ = $0.faults.removeValue(forKey: id) }
            }
            state.faults[id] = (body.trimmingCharacters(in: .whitespacesAndNewlines), task)
        }
        extras.manual?.record(.fault, body.trimmingCharacters(in: .whitespacesAndNewlines))
        // Answer once what starts now has been applied: a client that sends right after the answer meets the fault
        // (a fresh-clone run, s70q3: answered after the old 1 s bound while the connection was still being moved to
        // the shaping path, and the next byte passed unshaped). The bound, by the clock (a count of short sleeps
        // stretched on a loaded machine, s68), is for an injector that cannot apply at all, not a pace.
        let answerBy = ContinuousClock.now + Self.applyWait
        while startsNow, injector.appliedSoFar.isEmpty, ContinuousClock.now < answerBy {
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        return .json(FaultCreated(id: id, timeline: lines), status: .created)
    }
}
