package import ChaosCore
package import Logging
package import NIOCore

/// Makes the proxies of one run, all alike but for their spec: the scenario's at the start, the control
/// API's while it runs. They share the run's event loops, sink, clock and connection numbers.
package struct ProxyFactory: Sendable {
    /// The event loops the proxies relay on.
    package let group: any EventLoopGroup
    /// Where their traffic events go (nil: nowhere).
    package let sink: (any TrafficEventSink)?
    /// The run's clock.
    package let clock: RunClock
    let ids: ConnectionIDSource
    let seed: SeededGenerator
    let baseline: LinkProfile?
    let options: ProxyServer.Options
    let logger: Logger

    /// A factory; each proxy's generator is `seed` forked by its name.
    package init(
        group: any EventLoopGroup,
        sink: (any TrafficEventSink)?,
        clock: RunClock,
        ids: ConnectionIDSource = ConnectionIDSource(),
        seed: SeededGenerator,
        baseline: LinkProfile? = nil,
        options: ProxyServer.Options = ProxyServer.Options(),
        logger: Logger = Logger(label: "chaos.proxy")
    ) {
        self.group = group
        self.sink = sink
        self.clock = clock
        self.ids = ids
        self.seed = seed
        self.baseline = baseline
        self.options = options
        self.logger = logger
    }

    /// A proxy for `spec`, not started.
    package func make(_ spec: ProxySpec) -> ProxyServer {
        ProxyServer(
            spec: spec,
            group: group,
            sink: sink,
            clock: clock,
            ids: ids,
            seed: seed.fork("proxy:" + spec.name),
            baseline: baseline,
            options: options,
            logger: logger
        )
    }
}
