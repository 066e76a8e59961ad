import ChaosCore
import Glibc

/// Moving bytes: reads, writes, and passing FIN and resets on.
extension EpollRelayConnection {
    /// Reads from `source` and writes to its partner until the source runs dry, the partner
    /// stops taking bytes, or this connection has had its share of the turn.
    func pump(from source: Int) {
        let target = 1 - source
        var reads = 0
        while phase == .relaying, legs[source].readable, !legs[source].eof, !legs[target].hasPending {
            if reads == 16 { return loop.yieldTurn(self) }
            reads += 1
            let count = read(legs[source].fd, loop.scratch.baseAddress, loop.scratch.count)
            if count > 0 {
                route.counters.add(bytes: count, producedBy: source == 0)
                let bytes = UnsafeRawBufferPointer(rebasing: loop.scratch[0..<count])
                recordTraffic(.read(Self.side(source), Array(bytes)))
                guard forward(bytes, to: target) else { return }
                // A short read emptied the socket: the next byte or FIN raises a new edge.
                if count < loop.scratch.count, !legs[source].peerClosing { legs[source].readable = false }
            } else if count == 0 {
                legs[source].eof = true
                legs[source].readable = false
                recordClose(source, .fin)
                sendFIN(to: target)
            } else {
                let code = errno
                if code == EINTR { continue }
                guard code == EAGAIN || code == EWOULDBLOCK else { return fail(source, code) }
                legs[source].readable = false
            }
        }
    }

    /// Writes `bytes` to `target`; what the socket does not take is kept as the target's
    /// pending bytes (and reading stops until they are written). Returns true when all went.
    private func forward(_ bytes: UnsafeRawBufferPointer, to target: Int) -> Bool {
        var sent = 0
        while true {
            let count = send(legs[target].fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if count >= 0 {
                sent = count
                break
            }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { break }
            fail(target, code)
            return false
        }
        if sent > 0 {
            recordTraffic(.written(Self.side(target), Array(UnsafeRawBufferPointer(rebasing: bytes[0..<sent]))))
            wrote(sent, to: target)
        }
        guard sent < bytes.count else { return true }
        legs[target].pending = Array(bytes[sent...])
        legs[target].pendingStart = 0
        return false
    }

    /// Writes `target`'s pending bytes now that its socket takes more; once they are all out, the
    /// source's FIN is passed on or reading the source resumes.
    func flush(to target: Int) {
        while legs[target].hasPending {
            let start = legs[target].pendingStart
            let count = legs[target].pending.withUnsafeBytes {
                send(legs[target].fd, $0.baseAddress! + start, $0.count - start, Int32(MSG_NOSIGNAL))
            }
            if count < 0 {
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK { return }
                return fail(target, code)
            }
            recordTraffic(.written(Self.side(target), Array(legs[target].pending[start..<start + count])))
            wrote(count, to: target)
            legs[target].pendingStart += count
            if legs[target].hasPending { return }
        }
        legs[target].pending = []
        legs[target].pendingStart = 0
        let source = 1 - target
        if legs[source].eof { sendFIN(to: target) } else { pump(from: source) }
    }

    /// Passes a FIN on to `target` once nothing is pending for it. The last FIN of the two
    /// ends the connection: `close` sends it (both legs were read to the end, so it is a FIN,
    /// not a reset), saving the `shutdown`, unless a peer has not acknowledged its last bytes
    /// yet: then the FIN goes out with `shutdown` and the sockets stay open until it has (or
    /// ``AcknowledgementTracker/closeWait`` passed), so the audit sees them delivered.
    func sendFIN(to target: Int) {
        guard !legs[target].hasPending, !legs[target].finSent else { return }
        legs[target].finSent = true
        guard legs[0].eof, legs[1].eof, legs[0].finSent, legs[1].finSent else {
            _ = shutdown(legs[target].fd, Int32(SHUT_WR))
            return
        }
        let waiting = [pollAcknowledgements(0), pollAcknowledgements(1)].contains(true)
        guard waiting else { return closeBoth() }
        _ = shutdown(legs[target].fd, Int32(SHUT_WR))
        phase = .closing
        closeDeadline = EpollRelayLoop.now() &+ UInt64(AcknowledgementTracker.closeWait)
        watchAcknowledgements()
    }

    /// Closes both sockets with FIN and forgets the connection.
    private func closeBoth() {
        close(legs[0].fd)
        close(legs[1].fd)
        finish()
    }

    /// The loop's poll came due: reads what both peers acknowledged and polls again while bytes
    /// are outstanding; a `closing` connection closes once nothing is (or its deadline passed).
    func acknowledgementPollDue() {
        watchingAcknowledgements = false
        switch phase {
        case .closing:
            if !checkClosing() { watchAcknowledgements() }
        case .relaying:
            if [pollAcknowledgements(0), pollAcknowledgements(1)].contains(true) { watchAcknowledgements() }
        case .connecting, .done:
            break
        }
    }

    /// For a `closing` connection (on its poll or any event): closes it once neither peer has bytes
    /// outstanding or its deadline passed. Returns whether it closed.
    func checkClosing() -> Bool {
        guard phase == .closing else { return false }
        let more = [pollAcknowledgements(0), pollAcknowledgements(1)].contains(true)
        guard !more || EpollRelayLoop.now() >= closeDeadline else { return false }
        closeBoth()
        return true
    }

    /// Reads what `slot`'s peer acknowledged and records it when it moved; returns whether bytes
    /// are still outstanding there (and may yet be acknowledged).
    func pollAcknowledgements(_ slot: Int, beforeReset: Bool = false) -> Bool {
        guard route.trafficSink != nil else { return false }
        let (moved, more) = legs[slot].acknowledgements.poll(fd: legs[slot].fd, beforeReset: beforeReset)
        if let moved { recordTraffic(.acknowledged(Self.side(slot), upTo: moved)) }
        return more
    }

    /// `count` bytes went into `target`'s socket: its acknowledgements are polled soon.
    private func wrote(_ count: Int, to target: Int) {
        guard route.trafficSink != nil else { return }
        legs[target].acknowledgements.wrote(count)
        watchAcknowledgements()
    }

    private func watchAcknowledgements() {
        guard !watchingAcknowledgements else { return }
        watchingAcknowledgements = true
        loop.watchAcknowledgements(self)
    }

    /// A leg failed: a reset (or error) is passed on as a reset of the other leg.
    func fail(_ slot: Int, _ code: Int32) {
        _ = pollAcknowledgements(slot)
        recordClose(slot, code == ECONNRESET || code == EPIPE ? .reset : .error)
        let other = 1 - slot
        let resetsOther = !(legs[other].eof && legs[other].finSent)
        _ = pollAcknowledgements(other, beforeReset: resetsOther)
        recordClose(other, .reset)
        close(legs[slot].fd)
        if resetsOther { RawSocket.closeWithReset(legs[other].fd) } else { close(legs[other].fd) }
        finish()
    }

    /// Records a byte event when the sink wants them; only then are the bytes copied.
    func recordTraffic(_ kind: @autoclosure () -> TrafficEvent.Kind) {
        guard let sink = route.trafficSink else { return }
        sink.record(TrafficEvent(time: route.clock.now(), connection: id, kind: kind()))
    }
}
