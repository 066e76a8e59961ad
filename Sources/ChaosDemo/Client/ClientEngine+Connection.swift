import ChaosCore
import NIOCore

extension ClientEngine {
    func connectionActive(_ channel: any Channel) {
        guard !stopped else {
            channel.close(promise: nil)
            return
        }
        self.channel = channel
        lastActivated = channel
        established = false
        closingBecause = nil
        status.connectionsOpened += 1
        log?.event("connected", ["stream": stream, "connection": status.connectionsOpened])
        // HELLO carries the resume point; the naive client has none and says so.
        let hello =
            naive
            ? WireMessage(.hello, stream: stream, resume: false)
            : WireMessage(.hello, stream: stream, ack: downstream.lastProcessed, resume: true)
        channel.send(hello)
        if !naive { startHeartbeat(on: channel) }
    }

    func received(_ message: WireMessage, on channel: any Channel) {
        guard channel === self.channel else { return }
        switch message.kind {
        case .welcome: welcome(message, on: channel)
        case .msg:
            guard let seq = message.seq else { return }
            switch downstream.accept(seq) {
            case .duplicate:
                return
            case .process:
                break
            case .processAfterHole(let missing):
                log?.event("hole", ["dir": "down", "stream": stream, "from": missing.lowerBound, "to": missing.upperBound])
            }
            log?.processed(direction: "down", stream: stream, seq: seq)
            needsAck = true
        case .gap:
            guard let to = message.to, let skipped = downstream.skip(through: to) else { return }
            log?.event("gap-received", ["dir": "down", "stream": stream, "from": skipped.lowerBound, "to": skipped.upperBound])
            needsAck = true
        case .ack:
            if let ack = message.ack, !naive { upstream.acknowledge(upTo: ack) }
        case .ping:
            channel.send(WireMessage(.pong), flush: false)
        case .pong:
            pingTimeout?.cancel()
            pingTimeout = nil
        case .hello:
            break
        }
    }

    /// WELCOME: the connection is resumed; resend what the server has not processed (after a gap
    /// marker for what is no longer held), then carry on with live messages.
    private func welcome(_ message: WireMessage, on channel: any Channel) {
        established = true
        status.connectionsResumed += 1
        schedule.connectionSucceeded()
        guard !naive else {
            log?.event("welcomed", ["stream": stream])
            return
        }
        let (gap, resend) = upstream.resume(peerAck: message.ack ?? 0)
        if let gap {
            log?.event("gap-sent", ["dir": "up", "stream": stream, "from": gap.lowerBound, "to": gap.upperBound])
            channel.send(WireMessage(.gap, stream: stream, from: gap.lowerBound, to: gap.upperBound), flush: false)
        }
        for seq in resend { channel.send(.data(stream: stream, direction: "up", seq: seq), flush: false) }
        channel.flush()
        log?.event("resumed", ["stream": stream, "peer_ack": message.ack ?? 0, "resent": resend.count])
    }

    func readComplete(on channel: any Channel) {
        guard channel === self.channel else { return }
        if needsAck {
            needsAck = false
            persist()  // persisted before it is acknowledged: a restart never asks for less than was acked
            channel.send(WireMessage(.ack, stream: stream, ack: downstream.lastProcessed), flush: false)
        }
        channel.flush()
    }

    func connectionIdle(_ channel: any Channel) {}

    func connectionInactive(_ channel: any Channel, error: (any Error)?) {
        guard channel === self.channel else { return }
        self.channel = nil
        established = false
        heartbeat?.cancel()
        heartbeat = nil
        pingTimeout?.cancel()
        pingTimeout = nil
        let reason = closingBecause ?? (Self.isReset(error) ? .reset : .closed)
        closingBecause = nil
        status.disconnects[reason, default: 0] += 1
        log?.event("disconnected", ["stream": stream, "reason": reason.rawValue, "error": error.map { "\($0)" } ?? "none"])
        if reason != .stopped { scheduleReconnect(after: reason) }
    }

    /// Logs a heartbeat tick that came more than an interval late (`heartbeat-late`: the event loop was held) and an
    /// outstanding PING past its timeout by more than an interval (`heartbeat-overdue`: its timeout did not fire in
    /// time; the timeout logs it too when it fires that late).
    private func noteHeartbeat(interval: TimeAmount, timeout: TimeAmount) {
        let now = NIODeadline.now()
        if let last = lastHeartbeatTick, now - last > interval + interval {
            log?.event("heartbeat-late", ["stream": stream, "ms": Int((now - last).nanoseconds / 1_000_000)])
        }
        lastHeartbeatTick = now
        if pingTimeout != nil, let sent = pingSentAt, now - sent > timeout + interval {
            log?.event("heartbeat-overdue", ["stream": stream, "ms": Int((now - sent).nanoseconds / 1_000_000)])
        }
    }

    /// PING every interval; a PING unanswered for the timeout closes the connection (half-open).
    private func startHeartbeat(on channel: any Channel) {
        let interval = TimeAmount.nanoseconds(configuration.heartbeatInterval.nanoseconds)
        let timeout = TimeAmount.nanoseconds(configuration.heartbeatTimeout.nanoseconds)
        lastHeartbeatTick = nil
        heartbeat?.cancel()
        pingTimeout?.cancel()
        pingTimeout = nil
        heartbeat = loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            guard channel === self.channel else { return }
            self.noteHeartbeat(interval: interval, timeout: timeout)
            guard self.pingTimeout == nil else { return }
            self.pingSentAt = .now()
            // The timeout is armed before the PING goes out: a write that fails (a reset) closes the channel inside
            // send(), and connectionInactive must find the timeout to cancel. Armed after, it outlived the
            // connection and kept the next one from ever sending a PING (a partition it then never noticed).
            self.pingTimeout = self.loop.scheduleTask(in: timeout) {
                guard channel === self.channel else { return }
                // Fired more than an interval past its time: the loop was held (the process starved, a write that
                // blocked), so a half-open connection went unnoticed that long through no choice of the client's.
                if let sent = self.pingSentAt, case let waited = NIODeadline.now() - sent, waited > timeout + interval {
                    self.log?.event("heartbeat-overdue", ["stream": self.stream, "ms": Int(waited.nanoseconds / 1_000_000)])
                }
                self.log?.event("heartbeat-timeout", ["stream": self.stream])
                self.closingBecause = .heartbeatTimeout
                channel.close(promise: nil)
            }
            channel.send(WireMessage(.ping))
        }
    }
}
