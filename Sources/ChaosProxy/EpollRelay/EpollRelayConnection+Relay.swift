import ChaosCore
import Glibc

/// Moving bytes: reads, writes, and passing FIN and resets on.
extension EpollRelayConnection {
    /// Reads from `source` and writes to its partner until the source runs dry, the partner
    /// stops taking bytes, or this connection has had its share of the turn. A cut leg is read
    /// and dropped.
    func pump(from source: Int) {
        let target = 1 - source
        let side = Self.side(source)
        var reads = 0
        while !isDone, legs[source].readable, machine.mayRead(side) {
            if reads == 16 { return loop.yieldTurn(self) }
            reads += 1
            if splices, legs[source].bulk, !machine.leg(side).discardsReads {
                guard splice(from: source, to: target) else { return }
                continue
            }
            let capacity = loop.scratch.count
            let (count, read) =
                recordsTraffic
                ? readRecorded(source, capacity: capacity)
                : (Glibc.read(legs[source].fd, loop.scratch.baseAddress, capacity), [])
            if count > 0 {
                // A short read emptied the socket: the next byte or FIN raises a new edge.
                if count < capacity, !legs[source].peerClosing { legs[source].readable = false }
                if count == capacity, splices { legs[source].bulk = true }
                if machine.leg(side).discardsReads {
                    if machine.recordsDroppedReads(side) { recordTraffic(.read(side, read)) }
                    continue
                }
                route.counters.add(bytes: count, producedBy: source == 0)
                // The peer's acknowledgement of what it read before writing this is recorded first (as on NIO).
                if recordsTraffic { _ = pollAcknowledgements(source) }
                recordTraffic(.read(side, read))
                let forwarded =
                    recordsTraffic
                    ? read.withUnsafeBytes { forward($0, to: target, read: read) }
                    : forward(UnsafeRawBufferPointer(rebasing: loop.scratch[0..<count]), to: target, read: read)
                guard forwarded else { return }
            } else if count == 0 {
                legs[source].readable = false
                perform(machine.receivedFIN(side))
            } else {
                let code = errno
                if code == EINTR { continue }
                guard code == EAGAIN || code == EWOULDBLOCK else { return fail(source, code) }
                legs[source].readable = false
            }
        }
    }

    /// One move of what `source`'s socket holds into `target`'s pipe and on into its socket, with no copy through user
    /// space; what the target does not take waits in the pipe (and reading stops until it is written), as a read's
    /// pending bytes do. Returns false when the turn ends here (the target's bytes wait, or a leg failed). A socket the
    /// system will not splice makes the connection read and write from then on.
    private func splice(from source: Int, to target: Int) -> Bool {
        if legs[target].pipe == nil {
            guard let pipe = loop.takePipe() else {
                splices = false
                return true
            }
            legs[target].pipe = pipe
        }
        let moved = legs[target].pipe!.fill(from: legs[source].fd)
        if moved > 0 {
            // A short move need not have emptied the socket (a pipe fills by packets as well as bytes): the socket
            // counts as drained only when a move finds nothing (EAGAIN), so that no edge is waited for in vain.
            route.counters.add(bytes: moved, producedBy: source == 0)
            route.counters.add(splicedBytes: moved)
            guard drainPipe(to: target) else { return false }
            guard legs[target].pipe!.held > 0 else { return true }
            // At most one fill is held per direction: the target takes no more until it is written.
            perform(
                machine.pendingChanged(Self.side(target), hasPending: true)
                    + machine.acceptsChanged(Self.side(target), accepts: false)
            )
            return false
        }
        if moved == 0 {
            legs[source].readable = false
            perform(machine.receivedFIN(Self.side(source)))
            return true
        }
        switch Int32(-moved) {
        case EINTR:
            return true
        case EAGAIN, EWOULDBLOCK:
            legs[source].readable = false
            return true
        case EINVAL, ENOSYS, EOPNOTSUPP:
            splices = false
            return true
        case let code:
            fail(source, code)
            return false
        }
    }

    /// Moves what `target`'s pipe holds into its socket until it takes no more; false when the leg failed.
    private func drainPipe(to target: Int) -> Bool {
        while legs[target].pipe!.held > 0 {
            let moved = legs[target].pipe!.drain(to: legs[target].fd)
            if moved > 0 { continue }
            let code = Int32(-moved)
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return true }
            fail(target, code == 0 ? EPIPE : code)
            return false
        }
        return true
    }

    /// One read from `source` into an array of its own, the read event's bytes (and, written whole, the written
    /// event's): a large read is handed over in the array it was read into, with no copy; one under a quarter of that
    /// array's capacity (which the allocator rounds past `capacity`: 65,544 bytes for 64 KiB) is copied into an array
    /// of its size, so that a queued event holds at most four times what it carries. Returns what `read(2)` returned
    /// (errno set as it left it) and the bytes.
    private func readRecorded(_ source: Int, capacity: Int) -> (Int, [UInt8]) {
        var count = 0
        let read = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            count = Glibc.read(legs[source].fd, buffer.baseAddress, capacity)
            initialized = max(count, 0)
        }
        guard count > 0, count * 4 < read.capacity else { return (count, read) }
        return (count, read.withUnsafeBufferPointer { Array($0) })
    }

    /// Writes `bytes` to `target`; what the socket does not take is kept as the target's
    /// pending bytes (and reading stops until they are written). Returns true when all went.
    /// `read` is the read's own event copy: a write of the whole read hands the audit that same buffer (no second
    /// copy, and the audit knows the written bytes are the read ones without comparing them).
    private func forward(_ bytes: UnsafeRawBufferPointer, to target: Int, read: [UInt8]) -> Bool {
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
            recordTraffic(.written(Self.side(target), sent == read.count ? read : Array(UnsafeRawBufferPointer(rebasing: bytes[0..<sent]))))
            wrote(sent, to: target)
        }
        guard sent < bytes.count else { return true }
        legs[target].pending = Array(bytes[sent...])
        legs[target].pendingStart = 0
        // At most one read is held per direction: the target takes no more until it is written.
        perform(
            machine.pendingChanged(Self.side(target), hasPending: true)
                + machine.acceptsChanged(Self.side(target), accepts: false)
        )
        return false
    }

    /// Writes `target`'s pending bytes now that its socket takes more; once they are all out, the
    /// source's FIN is passed on and reading the source resumes (the machine says when).
    func flush(to target: Int) {
        if (legs[target].pipe?.held ?? 0) > 0 {
            guard drainPipe(to: target), legs[target].pipe?.held == 0 else { return }
            perform(machine.pendingChanged(Self.side(target), hasPending: false))
            perform(machine.acceptsChanged(Self.side(target), accepts: true))
            return
        }
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
        perform(machine.pendingChanged(Self.side(target), hasPending: false))
        perform(machine.acceptsChanged(Self.side(target), accepts: true))
    }

    /// Performs the machine's actions on the sockets, in order.
    func perform(_ actions: [RelayStateMachine.Action]) {
        for (index, action) in actions.enumerated() {
            switch action {
            case .recordClose(let side, let kind, let beforeReset):
                if beforeReset, kind == .resetByFault, !terminating { readWhatTheResetDrops(side.slot) }
                _ = pollAcknowledgements(side.slot, beforeReset: beforeReset)
                if kind == .reset, !beforeReset { recordAcknowledgementsCutByPeerReset(side) }
                recordClose(side.slot, kind)
            case .sendFIN(let side):
                // The last FIN of an orderly end goes out with `close` (see closeInOrder).
                if index + 1 < actions.count, actions[index + 1] == .closeInOrder { continue }
                _ = shutdown(legs[side.slot].fd, Int32(SHUT_WR))
            case .closeInOrder:
                closeBoth()
            case .awaitAcknowledgements(let side):
                awaitAcknowledgements(side.slot)
            case .resumeReading(let side):
                if !isDone { pump(from: side.slot) }
            case .discard(let side):
                legs[side.slot].pending = []
                legs[side.slot].pendingStart = 0
                legs[side.slot].pipe?.close()  // what it held is dropped with it
                legs[side.slot].pipe = nil
            case .reset(let side):
                closeSocket(side.slot, reset: true)
            case .close(let side):
                closeSocket(side.slot, reset: false)
            case .countCut:
                route.counters.connectionCut()
                route.cut(id)
            case .scheduleLinger(let delay):
                scheduleLinger(delay)
            case .cancelLinger:
                cancelLinger()
            case .recordUpstreamFailure:
                recordUpstreamFailure()
            case .finish:
                finish()
            }
        }
    }

    private func closeSocket(_ slot: Int, reset: Bool) {
        let fd = legs[slot].fd
        guard fd >= 0 else { return }
        legs[slot].fd = -1
        if reset { RawSocket.closeWithReset(fd) } else { close(fd) }
    }

    /// Reads what `slot`'s peer acknowledged until nothing written to it is outstanding or
    /// ``RelayStateMachine/acknowledgementWait`` passed (polled with the others, and on the leg's
    /// events), then tells the machine, which sends the leg's last FIN.
    private func awaitAcknowledgements(_ slot: Int) {
        guard pollAcknowledgements(slot) else { return perform(machine.acknowledgementsSettled(Self.side(slot))) }
        acknowledgementDeadlines[slot] = EpollRelayLoop.now() &+ UInt64(RelayStateMachine.acknowledgementWait.nanoseconds)
        watchAcknowledgements()
    }

    /// For a leg awaiting its acknowledgements (on a poll or any event): tells the machine once nothing is
    /// outstanding or its deadline passed. Returns whether it still waits.
    func checkAcknowledgementWait(_ slot: Int) -> Bool {
        let side = Self.side(slot)
        guard !isDone, machine.leg(side).awaitsAcknowledgements else { return false }
        if pollAcknowledgements(slot), EpollRelayLoop.now() < acknowledgementDeadlines[slot] { return true }
        perform(machine.acknowledgementsSettled(side))
        return false
    }

    /// Both legs ended in order (the last FIN not sent yet: `close` sends it, saving the `shutdown`;
    /// both legs were read to the end, so it is a FIN, not a reset): closes both sockets and forgets
    /// the connection.
    private func closeBoth() {
        closeSocket(0, reset: false)
        closeSocket(1, reset: false)
        perform(machine.closed(.client) + machine.closed(.server))
    }

    /// The loop's poll came due: reads what both peers acknowledged and polls again while bytes
    /// are outstanding; a leg awaiting its acknowledgements gets its FIN once nothing is (or its
    /// deadline passed).
    func acknowledgementPollDue() {
        watchingAcknowledgements = false
        guard !isDone, machine.phase == .relaying else { return }
        var more = false
        for slot in 0..<2 {
            let waits = machine.leg(Self.side(slot)).awaitsAcknowledgements
            if waits ? checkAcknowledgementWait(slot) : pollAcknowledgements(slot) { more = true }
        }
        guard more, !isDone else { return }
        // A peer whose ACK waits for a reply (delayed ACK, tens of milliseconds) is polled less and less often.
        acknowledgementPollsWaiting += 1
        let delay = AcknowledgementTracker.pollDelay(afterPolls: acknowledgementPollsWaiting)
        if delay <= AcknowledgementTracker.pollInterval { return watchAcknowledgements() }
        watchingAcknowledgements = true
        loop.schedule(after: UInt64(delay)) { [self] in acknowledgementPollDue() }
    }

    /// Reads what `slot`'s peer acknowledged and records it when it moved; returns whether bytes
    /// are still outstanding there (and may yet be acknowledged).
    func pollAcknowledgements(_ slot: Int, beforeReset: Bool = false) -> Bool {
        guard route.trafficSink != nil else { return false }
        guard legs[slot].fd >= 0 else { return false }
        let (moved, more) = legs[slot].acknowledgements.poll(fd: legs[slot].fd, beforeReset: beforeReset)
        if let moved { recordTraffic(.acknowledged(Self.side(slot), upTo: moved)) }
        return more
    }

    /// `side`'s peer reset its leg without a FIN first: what went out to it and was never seen acknowledged may have
    /// been read (see ``AcknowledgementTracker/sentUnacknowledged``), and no acknowledgement of it can come any more.
    /// A peer that had sent FIN closed its socket: what reached it since met no reader, and stays not delivered.
    private func recordAcknowledgementsCutByPeerReset(_ side: Side) {
        guard machine.peerResetWithoutFIN(side),
            let sent = legs[side.slot].acknowledgements.sentUnacknowledged
        else { return }
        recordTraffic(.path(.acknowledgementsCut(side, upTo: sent)))
    }

    /// `count` bytes went into `target`'s socket: its acknowledgements are polled soon.
    private func wrote(_ count: Int, to target: Int) {
        guard route.trafficSink != nil else { return }
        legs[target].acknowledgements.wrote(count)
        acknowledgementPollsWaiting = 0
        watchAcknowledgements()
    }

    private func watchAcknowledgements() {
        guard !watchingAcknowledgements else { return }
        watchingAcknowledgements = true
        loop.watchAcknowledgements(self)
    }

    /// A leg failed: a reset (or error) is passed on as a reset of the other leg.
    func fail(_ slot: Int, _ code: Int32) {
        perform(machine.failed(Self.side(slot), reset: code == ECONNRESET || code == EPIPE))
    }

    /// Records a byte event when the sink wants them; only then are the bytes copied.
    /// Whether traffic events are recorded at all (a `chaos proxy` without an audit records none).
    var recordsTraffic: Bool { route.trafficSink != nil }

    /// What `slot`'s socket still holds as the proxy resets it, read to drop and recorded before the leg's close: its
    /// peer's TCP had those bytes acknowledged (a capture of the leg shows them sent), and unread the audit would never
    /// count them sent (the NIO relay's reads before a reset: `ProxiedConnection+ResetDrain.swift`). At most
    /// ``resetDrainReads`` reads, to the socket's end.
    func readWhatTheResetDrops(_ slot: Int) {
        guard recordsTraffic, legs[slot].fd >= 0 else { return }
        let side = Self.side(slot)
        var reads = 0
        while reads < Self.resetDrainReads {
            let (count, read) = readRecorded(slot, capacity: loop.scratch.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            reads += 1
            recordTraffic(.read(side, read))
        }
    }

    /// The most reads before a reset: a receive buffer's worth and more.
    static let resetDrainReads = 256

    func recordTraffic(_ kind: @autoclosure () -> TrafficEvent.Kind) {
        guard let sink = route.trafficSink else { return }
        sink.record(TrafficEvent(time: route.clock.now(), connection: id, kind: kind()))
    }
}
