import ChaosCore
import Glibc

/// Moving bytes: reads, writes, and passing FIN and resets on.
extension PassthroughConnection {
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
    /// not a reset), saving the `shutdown`.
    func sendFIN(to target: Int) {
        guard !legs[target].hasPending, !legs[target].finSent else { return }
        legs[target].finSent = true
        guard legs[0].eof, legs[1].eof, legs[0].finSent, legs[1].finSent else {
            _ = shutdown(legs[target].fd, Int32(SHUT_WR))
            return
        }
        close(legs[0].fd)
        close(legs[1].fd)
        finish()
    }

    /// A leg failed: a reset (or error) is passed on as a reset of the other leg.
    func fail(_ slot: Int, _ code: Int32) {
        recordClose(slot, code == ECONNRESET || code == EPIPE ? .reset : .error)
        let other = 1 - slot
        recordClose(other, .reset)
        close(legs[slot].fd)
        if legs[other].eof, legs[other].finSent { close(legs[other].fd) } else { RawSocket.closeWithReset(legs[other].fd) }
        finish()
    }

    /// Records a byte event when the sink wants them; only then are the bytes copied.
    private func recordTraffic(_ kind: @autoclosure () -> TrafficEvent.Kind) {
        guard let sink = route.trafficSink else { return }
        sink.record(TrafficEvent(time: route.clock.now(), connection: id, kind: kind()))
    }
}
