package import ChaosCore

/// One call of a framing with RPCs (``FramingTraits/hasRPCs``) on a connection, as its request named it: what the
/// audit asks of it (its RPC, its request metadata) and what it keeps on it (its field readers, its stream names).
/// The plug-in's own subclass holds what its decoders need besides.
package class RPCCall {
    /// The id of the stream that carries it on its connection.
    package let streamID: UInt32
    /// The RPC, as the request names it (`/package.Service/Method`).
    package let path: String
    /// The audit's index of this RPC's field readers, once looked up (-1: none).
    package var readerIndex: Int?
    /// Per direction: the stream name `stream: header:NAME` or `rpc` gives its messages, once worked out.
    package var streamNames: [[UInt8]?] = [nil, nil]
    package var streamNamed = [false, false]
    /// The side whose end of the call was read (a server's end of its response, or either side's reset); nil while the
    /// call is open. That side's application takes nothing more of the call: what reaches it on the call afterwards is
    /// not delivered.
    package var endedBy: Side?
    /// The call ended in a reset (either side's): it is gone for both applications, and each side's stack drops what
    /// it had taken of the call and not handed over (a cancelled call's unread requests, a reset call's unread responses).
    package var endedAbortively = false

    /// A call on stream `streamID` of RPC `path`.
    init(streamID: UInt32, path: String) {
        self.streamID = streamID
        self.path = path
    }

    /// The value of the request metadata `name` (case-insensitive), if the call had it.
    package func header(_ name: String) -> String? { nil }
}
