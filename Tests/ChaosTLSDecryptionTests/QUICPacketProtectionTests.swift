import Crypto
import Testing

@testable import ChaosTLSDecryption

/// QUIC's packet protection against RFC 9001 Appendix A's examples: the Initial keys of a Destination Connection ID,
/// the client's and the server's protected Initial packets, a 1-RTT packet under AES and one under ChaCha20.
@Suite("QUIC packet protection (RFC 9001 Appendix A)")
struct QUICPacketProtectionTests {
    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    static func bytes(_ key: SymmetricKey) -> [UInt8] { key.withUnsafeBytes { Array($0) } }

    static let destination = hex("8394c8f03e515708")

    /// A.2: the client's Initial, its ClientHello in one CRYPTO frame, padded to 1200 bytes.
    static let clientInitial = hex(
        "c000000001088394c8f03e5157080000449e7b9aec34d1b1c98dd7689fb8ec11d242b123dc9bd8bab936b47d92ec356c0bab7df5976d27cd449f63300099f399"
            + "1c260ec4c60d17b31f8429157bb35a1282a643a8d2262cad67500cadb8e7378c8eb7539ec4d4905fed1bee1fc8aafba17c750e2c7ace01e6005f80fcb7df6212"
            + "30c83711b39343fa028cea7f7fb5ff89eac2308249a02252155e2347b63d58c5457afd84d05dfffdb20392844ae812154682e9cf012f9021a6f0be17ddd0c208"
            + "4dce25ff9b06cde535d0f920a2db1bf362c23e596d11a4f5a6cf3948838a3aec4e15daf8500a6ef69ec4e3feb6b1d98e610ac8b7ec3faf6ad760b7bad1db4ba3"
            + "485e8a94dc250ae3fdb41ed15fb6a8e5eba0fc3dd60bc8e30c5c4287e53805db059ae0648db2f64264ed5e39be2e20d82df566da8dd5998ccabdae053060ae6c"
            + "7b4378e846d29f37ed7b4ea9ec5d82e7961b7f25a9323851f681d582363aa5f89937f5a67258bf63ad6f1a0b1d96dbd4faddfcefc5266ba6611722395c906556"
            + "be52afe3f565636ad1b17d508b73d8743eeb524be22b3dcbc2c7468d54119c7468449a13d8e3b95811a198f3491de3e7fe942b330407abf82a4ed7c1b311663a"
            + "c69890f4157015853d91e923037c227a33cdd5ec281ca3f79c44546b9d90ca00f064c99e3dd97911d39fe9c5d0b23a229a234cb36186c4819e8b9c5927726632"
            + "291d6a418211cc2962e20fe47feb3edf330f2c603a9d48c0fcb5699dbfe5896425c5bac4aee82e57a85aaf4e2513e4f05796b07ba2ee47d80506f8d2c25e50fd"
            + "14de71e6c418559302f939b0e1abd576f279c4b2e0feb85c1f28ff18f58891ffef132eef2fa09346aee33c28eb130ff28f5b766953334113211996d20011a198"
            + "e3fc433f9f2541010ae17c1bf202580f6047472fb36857fe843b19f5984009ddc324044e847a4f4a0ab34f719595de37252d6235365e9b84392b061085349d73"
            + "203a4a13e96f5432ec0fd4a1ee65accdd5e3904df54c1da510b0ff20dcc0c77fcb2c0e0eb605cb0504db87632cf3d8b4dae6e705769d1de354270123cb11450e"
            + "fc60ac47683d7b8d0f811365565fd98c4c8eb936bcab8d069fc33bd801b03adea2e1fbc5aa463d08ca19896d2bf59a071b851e6c239052172f296bfb5e724047"
            + "90a2181014f3b94a4e97d117b438130368cc39dbb2d198065ae3986547926cd2162f40a29f0c3c8745c0f50fba3852e566d44575c29d39a03f0cda721984b6f4"
            + "40591f355e12d439ff150aab7613499dbd49adabc8676eef023b15b65bfc5ca06948109f23f350db82123535eb8a7433bdabcb909271a6ecbcb58b936a88cd4e"
            + "8f2e6ff5800175f113253d8fa9ca8885c2f552e657dc603f252e1a8e308f76f0be79e2fb8f5d5fbbe2e30ecadd220723c8c0aea8078cdfcb3868263ff8f09400"
            + "54da48781893a7e49ad5aff4af300cd804a6b6279ab3ff3afb64491c85194aab760d58a606654f9f4400e8b38591356fbf6425aca26dc85244259ff2b19c41b9"
            + "f96f3ca9ec1dde434da7d2d392b905ddf3d1f9af93d1af5950bd493f5aa731b4056df31bd267b6b90a079831aaf579be0a39013137aac6d404f518cfd4684064"
            + "7e78bfe706ca4cf5e9c5453e9f7cfd2b8b4c8d169a44e55c88d4a9a7f9474241e221af44860018ab0856972e194cd934"
    )
    static let clientInitialPlainHeader = hex("c300000001088394c8f03e5157080000449e00000002")
    static let clientHello = hex(
        "010000ed0303ebf8fa56f12939b9584a3896472ec40bb863cfd3e86804fe3a47f06a2b69484c00000413011302010000c000000010000e00000b6578"
            + "616d706c652e636f6dff01000100000a00080006001d00170018001000070005"
            + "04616c706e000500050100000000003300260024001d00209370b2c9caa47fba"
            + "baf4559fedba753de171fa71f50f1ce15d43e994ec74d748002b000302030400"
            + "0d0010000e0403050306030203080408050806002d00020101001c0002400100"
            + "3900320408ffffffffffffffff05048000ffff07048000ffff08011001048000"
            + "75300901100f088394c8f03e51570806048000ffff"
    )

    /// A.3: the server's Initial, an ACK and its ServerHello.
    static let serverInitial = hex(
        "cf000000010008f067a5502a4262b5004075c0d95a482cd0991cd25b0aac406a5816b6394100f37a1c69797554780bb38cc5a99f5ede4cf73c3ec2493a1839b3"
            + "dbcba3f6ea46c5b7684df3548e7ddeb9c3bf9c73cc3f3bded74b562bfb19fb84022f8ef4cdd93795d77d06edbb7aaf2f58891850abbdca3d20398c276456cbc4"
            + "2158407dd074ee"
    )
    static let serverInitialPlainHeader = hex("c1000000010008f067a5502a4262b50040750001")

    @Test("the Initial secrets and keys of Destination Connection ID 0x8394c8f03e515708 (A.1)")
    func initialKeys() {
        let keys = QUICPacketKeys.initial(destination: Self.destination, version: .v1)
        #expect(keys.client.secret == Self.hex("c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea"))
        #expect(Self.bytes(keys.client.key) == Self.hex("1f369613dd76d5467730efcbe3b1a22d"))
        #expect(keys.client.iv == Self.hex("fa044b2f42a3fd3b46fb255c"))
        #expect(Self.bytes(keys.client.headerKey) == Self.hex("9f50449e04a0e810283a1e9933adedd2"))
        #expect(keys.server.secret == Self.hex("3c199828fd139efd216c155ad844cc81fb82fa8d7446fa7d78be803acdda951b"))
        #expect(Self.bytes(keys.server.key) == Self.hex("cf3a5331653c364c88f0f379b6067e37"))
        #expect(keys.server.iv == Self.hex("0ac1493ca1905853b0bba03e"))
        #expect(Self.bytes(keys.server.headerKey) == Self.hex("c206b8d9b9f0f37644430b490eeaa314"))
    }

    @Test("the client's protected Initial opens to packet 2: its header, one CRYPTO frame with the ClientHello, 917 bytes of padding (A.2)")
    func clientInitial() throws {
        let packets = try QUICDatagram.packets(in: Self.clientInitial[...]) { _ in nil }
        #expect(packets.count == 1)
        let packet = try #require(packets.first)
        #expect(packet.type == .initial && packet.version == 1 && packet.destination == Self.destination && packet.source.isEmpty)
        #expect(packet.bytes.count == 1200)
        let opened = try packet.open(with: QUICPacketKeys.initial(destination: Self.destination, version: .v1).client, largest: nil)
        #expect(opened.number == 2)
        #expect(opened.header == Self.clientInitialPlainHeader)
        #expect(try QUICFrame.parse(opened.payload) == [.crypto(offset: 0, data: Self.clientHello), .padding(count: 917)])
    }

    @Test("the server's protected Initial opens to packet 1: an ACK of packet 0 and the ServerHello (A.3)")
    func serverInitial() throws {
        let packet = try #require(try QUICDatagram.packets(in: Self.serverInitial[...]) { _ in nil }.first)
        #expect(packet.source == Self.hex("f067a5502a4262b5") && packet.destination.isEmpty)
        let opened = try packet.open(with: QUICPacketKeys.initial(destination: Self.destination, version: .v1).server, largest: nil)
        #expect(opened.number == 1)
        #expect(opened.header == Self.serverInitialPlainHeader)
        let frames = try QUICFrame.parse(opened.payload)
        #expect(frames.count == 2)
        #expect(frames.first == .ack(ranges: [0...0], delay: 0, ecn: nil))
        guard case .crypto(0, let hello) = frames.last else {
            Issue.record("no CRYPTO frame: \(frames)")
            return
        }
        #expect(hello.count == 90 && hello.first == 2, "a ServerHello")
        #expect(ServerHelloFacts(body: hello.dropFirst(4))?.suite == 0x1301)
    }

    @Test("a 1-RTT packet under ChaCha20-Poly1305 opens to packet 654360564 carrying a PING (A.5)")
    func chaCha20ShortHeader() throws {
        let secret = Self.hex("9ac312a7f877468ebe69422748ad00a15443f18203a07d6060f688f30f21632b")
        let keys = QUICPacketKeys(secret: secret, suite: try #require(CipherSuite.quic(0x1303)), version: .v1)
        #expect(Self.bytes(keys.key) == Self.hex("c6d98ff3441c3fe1b2182094f69caa2ed4b716b65488960a7a984979fb23e1c8"))
        #expect(keys.iv == Self.hex("e0459b3474bdd0e44a41c144"))
        #expect(Self.bytes(keys.headerKey) == Self.hex("25a282b9e82f06f21f488917a4fc8f1b73573685608597d0efcb076b0ab7a7a4"))
        let datagram = Self.hex("4cfe4189655e5cd55c41f69080575d7999c25a5bfb")
        let packet = try #require(try QUICDatagram.packets(in: datagram[...]) { _ in 0 }.first)
        #expect(packet.type == .oneRTT && packet.destination.isEmpty)
        let opened = try packet.open(with: keys, largest: 654_360_563)
        #expect(opened.number == 654_360_564)
        #expect(opened.header == Self.hex("4200bff4"))
        #expect(try QUICFrame.parse(opened.payload) == [.ping])
    }

    @Test("a 1-RTT packet under AES-128-GCM to an 8-byte connection ID opens to packet 3, a CRYPTO frame")
    func aesShortHeader() throws {
        let keys = QUICPacketKeys(
            secret: Self.hex("310281977cb8c1c1c1212d784b2d29e5a6489e23de848d370a5a2f9537f3a100"),
            suite: .quicInitial,
            version: .v1
        )
        let datagram = Self.hex(
            "5db01fd24a586a9cf33dec094aaec6d6b4b7a5e15f5a3f05d06cf1ad0355c19dcce0807eecf7bf1c844a66e1ecd1f74b2a2d69bfd25d217833edd973246597bd"
                + "5107ea15cb1e210045396afa602fe23432f4ab24ce251b"
        )
        let id = Self.hex("b01fd24a586a9cf3")
        #expect(throws: QUICDatagram.Failure.unknownConnectionID) { try QUICDatagram.packets(in: datagram[...]) { _ in nil } }
        let packet = try #require(try QUICDatagram.packets(in: datagram[...]) { $0.starts(with: id) ? id.count : nil }.first)
        #expect(packet.destination == id)
        let opened = try packet.open(with: keys, largest: nil)
        #expect(opened.number == 3 && opened.header == Self.hex("41b01fd24a586a9cf30003") && !opened.keyPhase)
        let frames = try QUICFrame.parse(opened.payload)
        guard case .crypto(0, let ticket) = frames.first, frames.count == 1 else {
            Issue.record("\(frames)")
            return
        }
        #expect(ticket.count == 57 && ticket.first == 4, "a NewSessionTicket")
        // One flipped bit anywhere fails the AEAD.
        var tampered = datagram
        tampered[30] ^= 0x01
        let bad = try #require(try QUICDatagram.packets(in: tampered[...]) { _ in 8 }.first)
        #expect(throws: QUICPacketKeys.Failure.authentication) { try bad.open(with: keys, largest: nil) }
    }

    @Test("a key update derives the next secret and keys and keeps the header protection key (RFC 9001 §6)")
    func keyUpdate() {
        let keys = QUICPacketKeys(secret: [UInt8](repeating: 7, count: 32), suite: .quicInitial, version: .v1)
        let next = keys.updated()
        #expect(next.secret == KeyDerivation.expandLabel(keys.secret, "quic ku", length: 32, hash: .sha256))
        #expect(Self.bytes(next.headerKey) == Self.bytes(keys.headerKey))
        #expect(Self.bytes(next.key) != Self.bytes(keys.key))
        let v2 = QUICPacketKeys(secret: keys.secret, suite: .quicInitial, version: .v2)
        #expect(Self.bytes(v2.key) == KeyDerivation.expandLabel(keys.secret, "quicv2 key", length: 16, hash: .sha256))
    }

    @Test("the decoder opens the Initials of both ends: the ClientHello's random, the suite, the connection IDs each end issued")
    func decoderLearnsTheHandshake() {
        var decoder = QUICConnectionDecoder(keyLog: KeyLog())
        let client = decoder.decode(datagram: Self.clientInitial[...], from: .client)
        #expect(client.unopened.isEmpty && client.packets.map(\.number) == [2])
        #expect(decoder.initialDestination == Self.destination && decoder.version == .v1)
        #expect(decoder.clientRandom == Self.hex("ebf8fa56f12939b9584a3896472ec40bb863cfd3e86804fe3a47f06a2b69484c"))
        let server = decoder.decode(datagram: Self.serverInitial[...], from: .server)
        #expect(server.unopened.isEmpty && server.packets.map(\.number) == [1])
        #expect(decoder.suiteName == "TLS_AES_128_GCM_SHA256")
        #expect(decoder.issuedIDs[.server] == [Self.hex("f067a5502a4262b5")] && decoder.issuedIDs[.client] == [[]])
        #expect(!decoder.hasKeys(.client, .handshake), "no key log secrets for this random")
        // A Handshake packet then waits for its keys (a live key log may not have them yet); past the limit it is
        // unopened, and says why.
        let handshake: [UInt8] = [0xE0, 0, 0, 0, 1, 0, 8] + Self.hex("f067a5502a4262b5") + [0x40, 0x20] + [UInt8](repeating: 0x5A, count: 32)
        let later = decoder.decode(datagram: handshake[...], from: .server)
        #expect(later.packets.isEmpty && later.unopened.isEmpty && decoder.awaitingKeys == 1)
        for _ in 1..<QUICConnectionDecoder.awaitingLimit { _ = decoder.decode(datagram: handshake[...], from: .server) }
        #expect(decoder.awaitingKeys == QUICConnectionDecoder.awaitingLimit)
        #expect(decoder.decode(datagram: handshake[...], from: .server).unopened == [.noKeys(.handshake)])
    }
}

/// The frame and integer encodings on their own (RFC 9000 §16, §19, Appendix A).
@Suite("QUIC frames")
struct QUICFrameTests {
    @Test("variable-length integers: RFC 9000 A.1's examples")
    func varInts() {
        for (text, value) in [
            ("c2197c5eff14e88c", UInt64(151_288_809_941_952_652)), ("9d7f3e7d", 494_878_333), ("7bbd", 15293), ("25", 37), ("4025", 37),
        ] {
            var reader = ByteReader(QUICPacketProtectionTests.hex(text)[...])
            #expect(reader.varInt() == value, "\(text)")
            #expect(reader.isAtEnd)
        }
        var short = ByteReader([0x80, 0x01][...])
        #expect(short.varInt() == nil, "a 4-byte integer cut short")
    }

    @Test("packet numbers recovered from their truncated form (RFC 9000 A.3)")
    func packetNumbers() {
        #expect(QUICRawPacket.decodeNumber(0x9B32, bits: 16, largest: 0xA82F_30EA) == 0xA82F_9B32)
        #expect(QUICRawPacket.decodeNumber(0x00, bits: 8, largest: 0xFF) == 0x100, "past a wrap")
        #expect(QUICRawPacket.decodeNumber(0xFE, bits: 8, largest: 0x101) == 0xFE, "a late packet below the largest")
        #expect(QUICRawPacket.decodeNumber(5, bits: 8, largest: nil) == 5)
    }

    @Test("every frame the audit reads parses, ACK ranges highest first; a cut-short frame, a bad range and an unknown type are errors")
    func frames() throws {
        let payload: [UInt8] =
            [0x03, 0x20, 0x05, 0x02, 0x03]  // ACK ECN: largest 32, delay 5, 2 ranges more, first range 3 (29...32)
            + [0x01, 0x02]  // gap 1, length 2: 24...26
            + [0x00, 0x00]  // gap 0, length 0: 22...22
            + [0x01, 0x02, 0x03]  // ECN counts
            + [0x0F, 0x04, 0x40, 0x10, 0x03, 0x61, 0x62, 0x63]  // STREAM 4, offset 16, length 3, FIN
            + [0x08, 0x00, 0x78, 0x79]  // STREAM 0 to the end… (last, below)
        let tail: [UInt8] =
            [0x18, 0x01, 0x00, 0x04, 0xAA, 0xBB, 0xCC, 0xDD] + [UInt8](repeating: 0x11, count: 16)  // NEW_CONNECTION_ID
            + [0x1A] + [UInt8](1...8) + [0x1B] + [UInt8](1...8)  // PATH_CHALLENGE, PATH_RESPONSE
            + [0x1C, 0x0A, 0x08, 0x02, 0x68, 0x69]  // CONNECTION_CLOSE, PROTOCOL_VIOLATION of a STREAM frame, "hi"
            + [0x1D, 0x00, 0x00, 0x1E, 0x00, 0x00, 0x00]  // application close, HANDSHAKE_DONE, 3 bytes of padding
        let frames = try QUICFrame.parse(Array(payload.dropLast(4)) + tail + payload.suffix(4))
        #expect(
            frames == [
                .ack(ranges: [29...32, 24...26, 22...22], delay: 5, ecn: [1, 2, 3]),
                .stream(id: 4, offset: 16, data: [0x61, 0x62, 0x63], fin: true),
                .newConnectionID(sequence: 1, retirePriorTo: 0, id: [0xAA, 0xBB, 0xCC, 0xDD], resetToken: [UInt8](repeating: 0x11, count: 16)),
                .pathChallenge([UInt8](1...8)), .pathResponse([UInt8](1...8)),
                .connectionClose(code: 0x0A, frameType: 0x08, reason: Array("hi".utf8), application: false),
                .connectionClose(code: 0, frameType: nil, reason: [], application: true), .handshakeDone, .padding(count: 3),
                .stream(id: 0, offset: 0, data: [0x78, 0x79], fin: false),
            ]
        )
        #expect(frames.filter(\.isAckEliciting).count == 6)
        #expect(throws: QUICFrame.Failure.truncated(frameType: 0x06, at: 1)) { try QUICFrame.parse([0x01, 0x06, 0x00, 0x05, 0x61]) }
        #expect(throws: QUICFrame.Failure.badAckRange(at: 0)) { try QUICFrame.parse([0x02, 0x02, 0x00, 0x00, 0x05]) }
        #expect(throws: QUICFrame.Failure.unknownType(0x21, at: 0)) { try QUICFrame.parse([0x21]) }
    }
}
