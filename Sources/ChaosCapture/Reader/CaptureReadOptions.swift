package import ChaosTLSDecryption

/// How ``CaptureReader`` reads a capture.
package struct CaptureReadOptions: Hashable, Sendable {
    /// How the two legs of a connection through a proxy are recognised. (A QUIC connection's legs are paired by the
    /// Destination Connection ID of the client's first Initial, which both carry, in every mode but `off`.)
    package enum Pairing: Hashable, Sendable {
        /// Every TCP flow is its own connection; each payload is both read and written.
        case off
        /// A flow to this port is a client leg (client → proxy listen port); the next flow opened
        /// toward another port within the pairing window is its server leg. With several waiting
        /// client legs, the server leg waits for its payload: it is the leg of the client leg whose
        /// first bytes each way agree with its own (the proxy forwards bytes unchanged), else of
        /// the oldest. A client leg closed with no payload and no server leg is reported as `.refused`.
        case proxyPort(UInt16)
        /// Like `proxyPort`, guessing the listen port: a flow whose SYN comes from the host a pending
        /// flow's SYN went to, toward a different port, within the pairing window, is that flow's
        /// server leg (chosen among several by payload, as with `proxyPort`). Flows that stay
        /// unpaired are their own connections.
        case automatic
    }

    /// A BPF filter expression (as for tcpdump) applied before decoding, or nil for every packet.
    package var filter: String?
    /// The server's port: of a flow whose opening SYN is not in the capture, the end with this port
    /// is the server. Without it (and without a SYN) the lower port is taken as the server.
    package var serverPort: UInt16?
    /// How proxy legs are paired.
    package var pairing: Pairing
    /// With `.automatic` pairing: how long after a client leg's SYN its server leg's SYN may come,
    /// in nanoseconds.
    package var pairingWindow: Int64
    /// With `.proxyPort` pairing: how long a client leg waits for its server leg, in nanoseconds
    /// (a loaded proxy may dial late; the leg's events are held meanwhile).
    package var proxyPairingWindow: Int64
    /// The proxy name put into `ConnectionEndpoints.proxy`.
    package var proxyName: String
    /// The secrets to decrypt TLS conversations with (nil: TLS bytes are audited as they are). A flow whose first
    /// bytes are a TLS record is decrypted, and its plaintext audited; one the key log cannot open is a `protocol`
    /// anomaly (`TrafficEvent.TLSNote.problem`) and its bytes are not audited.
    package var keyLog: KeyLog?

    /// Creates options; the defaults read every packet and pair legs automatically within 1 s
    /// (30 s with an explicit proxy port).
    package init(
        filter: String? = nil,
        serverPort: UInt16? = nil,
        pairing: Pairing = .automatic,
        pairingWindow: Int64 = 1_000_000_000,
        proxyPairingWindow: Int64 = 30_000_000_000,
        proxyName: String = "capture"
    ) {
        self.filter = filter
        self.serverPort = serverPort
        self.pairing = pairing
        self.pairingWindow = pairingWindow
        self.proxyPairingWindow = proxyPairingWindow
        self.proxyName = proxyName
    }
}
