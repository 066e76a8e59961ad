import ChaosCore
import NIOCore
import NIOEmbedded

@testable import ChaosProxy

/// A ``ProxiedConnection`` whose legs are `EmbeddedChannel`s on one `EmbeddedEventLoop`: its shapers, relay
/// state machine and fault timers run in virtual time (`advance(by:)`), and what each leg's socket would send
/// is written down with its virtual time.
final class EmbeddedConnection {
    /// What reached one leg's socket, in order: bytes, a FIN, or a close (a reset closes without a FIN first).
    final class Wire: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        enum Event: Equatable {
            case data(String)
            case fin
            case close
        }

        private(set) var events: [(at: Int64, event: Event)] = []
        /// Every byte sent, in order.
        var text: String { events.compactMap { if case .data(let text) = $0.event { text } else { nil } }.joined() }
        /// The sizes of the writes, in order.
        var pieces: [Int] { events.compactMap { if case .data(let text) = $0.event { text.utf8.count } else { nil } } }
        /// When (virtual ms) each event happened.
        func times(of wanted: Event) -> [Int64] { events.filter { $0.event == wanted }.map { $0.at / 1_000_000 } }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            let buffer = unwrapOutboundIn(data)
            if buffer.readableBytes > 0 { note(.data(String(buffer: buffer)), context) }
            promise?.succeed()
        }

        func flush(context: ChannelHandlerContext) {}

        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            note(mode == .output ? .fin : .close, context)
            if mode == .output { promise?.succeed() } else { context.close(mode: mode, promise: promise) }
        }

        private func note(_ event: Event, _ context: ChannelHandlerContext) {
            events.append((Int64(context.eventLoop.now.uptimeNanoseconds), event))
        }
    }

    let loop = EmbeddedEventLoop()
    let channels: [Side: EmbeddedChannel]
    let wires: [Side: Wire]
    let connection: ProxiedConnection

    /// A connection that starts under `faults` (as a new one does under faults on every connection).
    init(seed: UInt64 = 1, startingUnder faults: [FaultEffect] = []) throws {
        var channels: [Side: EmbeddedChannel] = [:]
        var wires: [Side: Wire] = [:]
        var legs: [Side: ProxiedConnection.Leg] = [:]
        let generator = SeededGenerator(seed: seed).fork("connection", 1)
        for side in Side.allCases {
            let channel = EmbeddedChannel(loop: loop)
            let wire = Wire()
            let relay = RelayHandler(side: side)
            let shaper = ShapingHandler(generator: generator.fork(side.rawValue))
            try channel.pipeline.syncOperations.addHandlers([wire, shaper, relay])
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            channels[side] = channel
            wires[side] = wire
            legs[side] = ProxiedConnection.Leg(channel: channel, relay: relay, shaper: shaper)
        }
        self.channels = channels
        self.wires = wires
        connection = ProxiedConnection(
            id: 1,
            endpoints: ConnectionEndpoints(proxy: "p", client: "", listen: "", proxyLocal: "", server: ""),
            client: legs[.client]!,
            server: legs[.server]!,
            sink: nil,
            clock: RunClock(),
            counters: ProxyCounters(),
            deadPathInKernel: false,
            onCut: { _ in },
            onFinished: { _ in }
        )
        connection.start(
            baseline: nil,
            shaping: Dictionary(
                uniqueKeysWithValues: faults.enumerated().map {
                    (ShapingKey(timeline: 1, occurrence: $0.offset + 1), $0.element)
                }
            )
        )
    }

    /// Puts a fault on the connection, as a proxy does for one that reaches it.
    func add(_ effect: FaultEffect, key: Int = 1) { connection.addShaping(effect, key: ShapingKey(timeline: 1, occurrence: key)) }

    /// Lifts it.
    func remove(key: Int = 1) { connection.removeShaping(key: ShapingKey(timeline: 1, occurrence: key)) }

    /// `side`'s peer sends `text`.
    func send(_ text: String, from side: Side) throws { try channels[side]!.writeInbound(ByteBuffer(string: text)) }

    /// `side`'s peer sends FIN.
    func sendFIN(from side: Side) { channels[side]!.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }

    /// Moves virtual time on, running what falls due.
    func advance(byMilliseconds ms: Int64) { loop.advanceTime(by: .milliseconds(ms)) }

    /// What reached the socket facing `side`.
    func wire(_ side: Side) -> Wire { wires[side]! }
}
