import ChaosCore

/// `lines` and `length-prefixed` framing as a leg decoder: a ``FrameSplitter`` with no protocol events.
final class SplitterDecoder: LegDecoder {
    private var splitter: FrameSplitter

    init(mode: FrameSplitter.Mode, maximumFrame: Int) {
        splitter = FrameSplitter(mode: mode, maximumFrame: maximumFrame)
    }

    @inline(__always)
    func decode(_ input: UnsafeBufferPointer<UInt8>, _ output: (DecoderOutput) -> Void) {
        let problem = splitter.split(input) { body, end in output(.message(body, end: end, binary: false)) }
        if let problem { output(.problem(.framing(problem), at: input.count)) }
    }

    var hasPartialMessage: Bool { splitter.hasPartialFrame }

    func dropPartial() { splitter.dropPartial() }

    var canHandOverState: Bool { splitter.isAtBoundary }

    func adoptState(of other: any LegDecoder) -> Bool {
        guard let other = other as? SplitterDecoder, other.splitter.mode == splitter.mode else { return false }
        splitter = other.splitter
        return true
    }
}

/// The session of `lines` and `length-prefixed` connections: nothing is shared between legs, so one session
/// serves every connection.
final class SplitterSession: ProtocolSession, ProtocolFramer {
    let mode: FrameSplitter.Mode

    init(mode: FrameSplitter.Mode) {
        self.mode = mode
    }

    func makeSession() -> any ProtocolSession { self }

    /// Lines and length-prefixed frames carry nothing of the proxy's own.
    var proxyWritesOnlyRelayedBytes: Bool { true }

    func makeDecoder(_ direction: Direction, cap: Int) -> any LegDecoder { SplitterDecoder(mode: mode, maximumFrame: cap) }
}
