extension WebSocketDecoder {
    /// Takes the current frame's payload bytes from `input` (unmasking, joining, inflating as needed); returns
    /// where the next frame starts. A whole plain frame in one read is handed over in place.
    func readPayload(_ input: UnsafeBufferPointer<UInt8>, from start: Int, _ output: (DecoderOutput) -> Void) -> Int {
        let take = Int(min(remaining, UInt64(input.count - start)))
        let chunk = UnsafeBufferPointer(rebasing: input[start..<(start + take)])
        let end = start + take
        if opcode >= 8 {
            appendUnmasked(chunk, to: &control)
        } else if fin, opcode != 0, !masked, !messageCompressed, !oversized, UInt64(take) == frameLength {
            // A whole unfragmented, uncompressed, unmasked frame in this read: handed over in place, no copy.
            messageOpen = false
            phase = .header
            output(.message(chunk, end: end, binary: messageBinary))
            return end
        } else if messageCompressed {
            guard inflate(chunk) else {
                stop("a compressed message that does not inflate (not a permessage-deflate stream)", at: end, output)
                return input.count
            }
        } else if !oversized {
            appendUnmasked(chunk, to: &message)
        }
        remaining -= UInt64(take)
        if remaining == 0 { frameEnded(at: end, output) }
        return phase == .stopped ? input.count : end
    }

    /// Appends `chunk` to `buffer`, unmasked when the frame is masked.
    @inline(__always)
    private func appendUnmasked(_ chunk: UnsafeBufferPointer<UInt8>, to buffer: inout [UInt8]) {
        let old = buffer.count
        buffer.append(contentsOf: chunk)
        guard masked else { return }
        // Byte i of the chunk is masked with key byte (maskIndex + i) % 4: turn the key so that its byte 0 is the
        // chunk's first, then unmask eight bytes at a time.
        let shift = 8 * UInt32(maskIndex & 3)
        let turned = mask >> shift | mask << (32 - shift)
        let wide = UInt64(turned) | UInt64(turned) << 32
        let count = chunk.count
        buffer.withUnsafeMutableBytes { bytes in
            let base = bytes.baseAddress! + old
            var index = 0
            while index + 8 <= count {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index, as: UInt64.self)) ^ wide
                base.storeBytes(of: word.littleEndian, toByteOffset: index, as: UInt64.self)
                index += 8
            }
            while index < count {
                base.storeBytes(
                    of: base.load(fromByteOffset: index, as: UInt8.self) ^ UInt8(truncatingIfNeeded: turned >> (8 * UInt32(index & 3))),
                    toByteOffset: index,
                    as: UInt8.self
                )
                index += 1
            }
        }
        maskIndex = (maskIndex + count) & 3
    }

    /// Inflates part of a compressed message's payload (unmasked first, through a bounded scratch buffer).
    private func inflate(_ chunk: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let inflater else { return false }
        guard masked else { return inflater.inflate(chunk) { self.appendInflated($0) } }
        var offset = 0
        while offset < chunk.count {
            let piece = min(Inflater.chunk, chunk.count - offset)
            scratch.removeAll(keepingCapacity: true)
            appendUnmasked(UnsafeBufferPointer(rebasing: chunk[offset..<(offset + piece)]), to: &scratch)
            let ok = scratch.withUnsafeBufferPointer { inflater.inflate($0) { self.appendInflated($0) } }
            guard ok else { return false }
            offset += piece
        }
        return true
    }

    private func appendInflated(_ bytes: UnsafeBufferPointer<UInt8>) {
        messageSize = messageSize &+ UInt64(bytes.count)
        guard !oversized else { return }
        if messageSize > UInt64(cap) { return becomeOversized() }
        message.append(contentsOf: bytes)
    }

    func frameEnded(at end: Int, _ output: (DecoderOutput) -> Void) {
        phase = .header
        if opcode >= 8 { return controlFrame(at: end, output) }
        guard fin else { return }
        if messageCompressed, let inflater {
            let reset = session.deflate?.noContextTakeover(upstream: upstream) ?? true
            guard inflater.finishMessage(reset: reset, { self.appendInflated($0) }) else {
                return stop("a compressed message that does not inflate (not a permessage-deflate stream)", at: end, output)
            }
        }
        messageOpen = false
        if oversized {
            output(.event(.oversized(bytes: Int(clamping: messageSize), end: end), at: end))
            oversized = false
        } else {
            message.withUnsafeBufferPointer { output(.message($0, end: end, binary: messageBinary)) }
        }
        message.removeAll(keepingCapacity: message.capacity <= 1 << 20)
    }

    private func controlFrame(at end: Int, _ output: (DecoderOutput) -> Void) {
        switch opcode {
        case 8:
            guard control.count != 1 else { return stop("a close frame with a 1-byte payload (a code takes 2)", at: end, output) }
            let code = control.count >= 2 ? UInt16(control[0]) << 8 | UInt16(control[1]) : nil
            phase = .closed
            output(.event(.closing, at: end))
            output(.event(.coded("closeCodes", code: code.map(String.init) ?? "none"), at: end))
        case 9: output(.event(.counted("pings"), at: end))
        default: output(.event(.counted("pongs"), at: end))
        }
    }
}
