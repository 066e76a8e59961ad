import ChaosCore
import NIOCore

extension ServerEngine {
    /// HELLO: attach the connection to its stream (taking over from an older, maybe half-open, one),
    /// answer WELCOME with the last upstream seq processed, and resend what the client has not seen.
    func hello(_ message: WireMessage, on connection: ServerConnection) {
        guard let name = message.stream, !name.isEmpty else {
            connection.channel.close(promise: nil)
            return
        }
        let stream = stream(named: name)
        if let previous = stream.attached, previous !== connection {
            log?.event("takeover", ["stream": name, "connection": previous.id])
            if configuration.takeoverBug > 0, Double.random(in: 0..<1) < configuration.takeoverBug {
                // The planted bug: what was written to the old connection counts as delivered.
                log?.event("takeover-bug", ["stream": name, "skipped_through": stream.downstream.lastAssigned])
                stream.downstream.acknowledge(upTo: stream.downstream.lastAssigned)
            }
            previous.stream = nil
            previous.channel.close(promise: nil)
        }
        connection.stream = stream
        stream.attached = connection
        stream.resumes = message.resume ?? true
        stream.upstream.deduplicates = stream.resumes
        let channel = connection.channel
        channel.send(WireMessage(.welcome, stream: name, ack: stream.upstream.lastProcessed), flush: false)
        if stream.resumes {
            let (gap, resend) = stream.downstream.resume(peerAck: message.ack ?? 0)
            if let gap {
                log?.event("gap-sent", ["dir": "down", "stream": name, "from": gap.lowerBound, "to": gap.upperBound])
                channel.send(WireMessage(.gap, stream: name, from: gap.lowerBound, to: gap.upperBound), flush: false)
            }
            for seq in resend { channel.send(.data(stream: name, direction: "down", seq: seq), flush: false) }
            log?.event(
                "resumed",
                [
                    "stream": name, "connection": connection.id, "peer_ack": message.ack ?? 0,
                    "resent": resend.count,
                ]
            )
        } else {
            stream.downstream.discardUnacknowledged()
            log?.event("fresh", ["stream": name, "connection": connection.id])
        }
        channel.flush()
        startProducer(for: stream)
    }

    private func startProducer(for stream: ServerStream) {
        guard stream.producer == nil, configuration.rate > 0, sendWindow.isOpen else { return }
        let period = TimeAmount.nanoseconds(Int64((1e9 / configuration.rate).rounded()))
        let name = stream.name
        stream.producer = loop.scheduleRepeatedTask(initialDelay: period, delay: period) { _ in
            if let stream = self.streams[name] { self.produce(on: stream) }
        }
    }

    /// One downstream message: number it, keep it until acknowledged (unless the client is naive), send it.
    private func produce(on stream: ServerStream) {
        guard let connection = stream.attached, !stopped else { return }
        if !sendWindow.isOpen {
            stream.producer?.cancel()
            stream.producer = nil
            return
        }
        let (seq, dropped) = stream.downstream.append()
        if !stream.resumes {
            stream.downstream.discardUnacknowledged()
        } else if let dropped {
            log?.event("gap-sent", ["dir": "down", "stream": stream.name, "from": dropped.lowerBound, "to": dropped.upperBound])
            connection.channel.send(
                WireMessage(.gap, stream: stream.name, from: dropped.lowerBound, to: dropped.upperBound),
                flush: false
            )
        }
        connection.channel.send(.data(stream: stream.name, direction: "down", seq: seq))
    }

    private func stream(named name: String) -> ServerStream {
        if let existing = streams[name] { return existing }
        let created = ServerStream(name: name, queueCapacity: configuration.queueCapacity)
        streams[name] = created
        return created
    }
}
