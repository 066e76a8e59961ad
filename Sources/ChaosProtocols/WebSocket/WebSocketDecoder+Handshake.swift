extension WebSocketDecoder {
    /// Reads the upgrade request (upstream) or response (downstream) up to its blank line; returns where the
    /// frames start. Anything that is not HTTP/1.1 stops the leg at once, not 16 KiB later.
    func readHandshake(_ input: UnsafeBufferPointer<UInt8>, from start: Int, _ output: (DecoderOutput) -> Void) -> Int {
        let expected: [UInt8] = upstream ? Array("GET ".utf8) : Array("HTTP/".utf8)
        var position = start
        while position < input.count {
            let byte = input[position]
            position += 1
            if head.count < expected.count, byte != expected[head.count] {
                stop(
                    "not a WebSocket upgrade \(upstream ? "request" : "response"): the bytes do not start with '\(String(decoding: expected, as: UTF8.self))'",
                    at: position - 1,
                    output
                )
                return input.count
            }
            head.append(byte)
            if byte == 10, head.count >= 4, head[head.count - 2] == 13, head[head.count - 3] == 10, head[head.count - 4] == 13 {
                let text = String(decoding: head, as: UTF8.self)
                head = []
                handshakeEnded(text, at: position, output)
                return phase == .stopped ? input.count : position
            }
            if head.count > Self.handshakeLimit {
                stop("no end of the HTTP headers within \(Self.handshakeLimit) bytes", at: position, output)
                return input.count
            }
        }
        return position
    }

    private func handshakeEnded(_ text: String, at end: Int, _ output: (DecoderOutput) -> Void) {
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: true).map(String.init)
        guard !lines.isEmpty else { return stop("an empty HTTP message", at: end, output) }
        let first = lines.removeFirst()
        var headers: [(name: String, value: String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else {
                return stop("an HTTP header line without a colon: \(line.prefix(80))", at: end, output)
            }
            headers.append((line[..<colon].trimmingSpaces.lowercased(), line[line.index(after: colon)...].trimmingSpaces))
        }
        let parts = first.split(separator: " ", maxSplits: 2).map(String.init)
        if upstream {
            let upgrade = headers.first { $0.name == "upgrade" }?.value.lowercased() ?? ""
            guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), upgrade.contains("websocket") else {
                return stop("not a WebSocket upgrade request: \(first.prefix(80))", at: end, output)
            }
            session.requested(target: parts[1], headers: headers)
            phase = .header
            output(.event(.requestRead, at: end))
        } else {
            guard parts.count >= 2, let status = Int(parts[1]), (100...599).contains(status) else {
                return stop("not an HTTP status line: \(first.prefix(80))", at: end, output)
            }
            if (100...199).contains(status), status != 101 { return }  // an interim answer: the real one follows
            session.answered(status: status, headers: headers)
            if status == 101 {
                phase = .header
                output(.event(.counted("upgrades"), at: end))
            } else {
                phase = .stopped
                output(.event(.counted("upgradeFailures"), at: end))
            }
        }
    }
}
