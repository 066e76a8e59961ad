/// The TCP header flags chaos writes and reads.
struct TCPFlags: OptionSet, Hashable, Sendable {
    let rawValue: UInt8

    static let fin = TCPFlags(rawValue: 0x01)
    static let syn = TCPFlags(rawValue: 0x02)
    static let rst = TCPFlags(rawValue: 0x04)
    static let psh = TCPFlags(rawValue: 0x08)
    static let ack = TCPFlags(rawValue: 0x10)
}
