import ChaosCore
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

    struct FaultList: Encodable {
        struct Entry: Encodable { var id: Int; var fault: String }
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
            guard let id else { defer { state.faults = [:] }; return state.faults.values.map(\.task) }
            return state.faults.removeValue(forKey: id).map { [$0.task] }
        }
        guard let tasks else { return .error("no active fault \(id ?? 0)", status: .notFound) }
        for task in tasks { task.cancel(); await task.value }
        return .json(Lifted(lifted: tasks.count))
    }

    /// Draws a fault the way a scenario's are drawn (the same parser, rules and timeline), from the API's
    /// seed forked by the fault's id; its shaping is keyed by that id, apart from the run's own. Its marks
    /// go to the run's event stream at the run's time, as a scheduled fault's do.
    func addFault(_ body: String) async -> APIResponse {
        let proxies = state.withLock { $0.servers }
        let specs = proxies.map(\.spec)
        let rule: FaultRule
        do {
            // An instant fault with neither 'at' nor 'every' happens now (as a toxic does); 'at' counts from the request.
            rule = try FaultRule.parse(body, proxies: specs, duration: Self.forever, source: "request body", instantAt: .zero)
            try rule.checkInvariants(source: "request body", proxies: Set(specs.map(\.name)))
            try rule.checkBegins(within: Self.forever, source: "request body")
        } catch let error as ChaosError {
            return .error(error.description, status: .badRequest)
        } catch {
            return .error("\(error)", status: .badRequest)
        }
        let id = state.withLock { $0.nextID() }
        var generator = SeededGenerator(seed: seed).fork("api", UInt64(id))
        let timeline = Timeline(rules: [rule], seed: generator.next(), duration: Self.forever)
        let lines = timeline.lines(first: 20)
        let startsNow = timeline.prefix(1).contains { $0.at == .zero }
        let clock = ShiftedClock(base: factory.clock, origin: factory.clock.now())
        let injector = FaultInjector(timeline: timeline, number: id, proxies: proxies, clock: clock, sink: factory.sink)
        // Made under the lock, so that a fault that is over at once (a disconnect) is kept before it is let go:
        // a fault whose timeline has ended is no longer active (GET /faults, /metrics).
        state.withLock { state in
            let task = Task { [weak self] in
                await injector.run()
                self?.state.withLock { _ = $0.faults.removeValue(forKey: id) }
            }
            state.faults[id] = (body.trimmingCharacters(in: .whitespacesAndNewlines), task)
        }
        // Answer once what starts now has been applied.
        for _ in 0..<200 where startsNow && injector.appliedSoFar.isEmpty {
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        return .json(FaultCreated(id: id, timeline: lines), status: .created)
    }
}

/// The run's clock for a timeline that starts at `origin`: it sleeps until `origin + t`, and reads the
/// run's time, so that the marks it records sit where they happened in the run.
struct ShiftedClock: FaultClock {
    let base: RunClock
    let origin: Int64

    func now() -> Int64 { base.now() }

    func sleep(until time: Int64) async throws {
        try await base.sleep(until: origin.saturatingAdding(time))
    }
}
