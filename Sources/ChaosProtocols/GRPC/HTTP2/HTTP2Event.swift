/// What an observer of one direction of an HTTP/2 connection saw, in wire order. Offsets are byte offsets in
/// that direction's stream (0 = its first byte), so an event can be tied to the TCP acknowledgements of the
/// bytes that carried it.
package enum HTTP2Event: Equatable, Sendable {
    /// The client's connection preface (`PRI * HTTP/2.0…`), or the server's answer to an h2c upgrade.
    case preface
    /// A SETTINGS frame: each (identifier, value); `ack` frames carry none.
    case settings(ack: Bool, values: [HTTP2Setting])
    /// A complete header block (HEADERS + CONTINUATION), HPACK-decoded; `endStream` when it also ends the stream
    /// (a request with no body, or a response's trailers).
    case headers(stream: UInt32, fields: [HTTP2HeaderField], endStream: Bool)
    /// A DATA frame's payload (padding removed), and whether it ends the stream. `endOffset` is one past its last
    /// byte on the wire. The payload is a slice of the decoder's own buffer: no copy per frame.
    case data(stream: UInt32, payload: ArraySlice<UInt8>, endStream: Bool, endOffset: Int64)
    /// RST_STREAM with its error code.
    case reset(stream: UInt32, code: UInt32)
    /// GOAWAY: the last stream the sender will process, the error code and the debug data as text.
    case goaway(lastStream: UInt32, code: UInt32, debug: String)
    /// PING (a keepalive when not `ack`, its answer when `ack`), with its 8 opaque bytes.
    case ping(ack: Bool, opaque: UInt64)
    /// Bytes that are not HTTP/2: the reason and where. Nothing after it in this direction is decoded.
    case protocolError(offset: Int64, reason: String)
}

/// One SETTINGS parameter.
package struct HTTP2Setting: Equatable, Sendable {
    /// The identifier (1 header table size, 2 enable push, 3 max concurrent streams, 4 initial window size,
    /// 5 max frame size, 6 max header list size).
    package var identifier: UInt16
    /// Its value.
    package var value: UInt32

    /// A setting.
    package init(identifier: UInt16, value: UInt32) {
        self.identifier = identifier
        self.value = value
    }
}

/// One decoded header field.
package struct HTTP2HeaderField: Equatable, Sendable {
    /// The name (lower case in HTTP/2; pseudo-headers start with `:`).
    package var name: String
    /// The value.
    package var value: String

    /// A field.
    package init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// HTTP/2 error codes by name, for reports (RFC 9113 section 7).
package enum HTTP2ErrorCode {
    /// `NO_ERROR`, `PROTOCOL_ERROR`, … for a code; `0xN` for one RFC 9113 does not name.
    package static func name(_ code: UInt32) -> String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
            "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR",
            "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return code < names.count ? names[Int(code)] : "0x" + String(code, radix: 16)
    }
}

/// gRPC status codes by name (grpc's doc/statuscodes.md), for reports.
package enum GRPCStatusName {
    /// `OK`, `CANCELLED`, … `UNAUTHENTICATED` for 0 … 16; the number as text for any other.
    package static func name(_ code: Int) -> String {
        let names = [
            "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
            "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
            "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
        ]
        return names.indices.contains(code) ? names[code] : String(code)
    }
}
