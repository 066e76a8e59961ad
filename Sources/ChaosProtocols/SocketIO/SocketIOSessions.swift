import Foundation
import Synchronization

/// The Engine.IO sessions of one audit, across its TCP connections: a Socket.IO client's session lives on several
/// (long-polling requests, then the upgraded WebSocket), each its own ``SocketIOSession``; they meet by the session
/// id (`sid`) that the open packet gave and every later request names. Per session: the handshake request (its query
/// and headers, for `stream: query:NAME` / `header:NAME` on the connections that came after) and the CONNECT packet's
/// auth (for `stream: auth:KEY`). Bounded: past ``limit`` sessions the oldest are forgotten.
final class SocketIOSessions: Sendable {
    /// What one Engine.IO session is known by.
    struct Entry: Sendable {
        /// The request that opened it (`/socket.io/?EIO=4&transport=polling&stream=c1`) and its headers.
        var target: String
        var headers: [Header]
        /// The CONNECT packet's auth: its top-level scalar values as text.
        var auth: [String: String] = [:]
    }

    /// A request header (name lowercased).
    struct Header: Sendable, Equatable {
        var name: String
        var value: String
    }

    /// The most sessions remembered.
    static let limit = 100_000

    private let state = Mutex<(entries: [String: Entry], order: [String])>(([:], []))

    /// A session opened (`sid`) by the request `target` with `headers`.
    func opened(_ sid: String, target: String, headers: [(name: String, value: String)]) {
        state.withLock { state in
            if state.entries[sid] == nil {
                state.order.append(sid)
                if state.order.count > Self.limit {
                    let oldest = state.order.removeFirst()
                    state.entries[oldest] = nil
                }
            }
            state.entries[sid] = Entry(target: target, headers: headers.map { Header(name: $0.name, value: $0.value) })
        }
    }

    /// The CONNECT packet of session `sid` carried `auth`.
    func connected(_ sid: String, auth: [String: String]) {
        state.withLock { $0.entries[sid]?.auth = auth }
    }

    /// What session `sid` is known by.
    func entry(_ sid: String) -> Entry? { state.withLock { $0.entries[sid] } }

    /// A CONNECT payload's top-level scalars as text (`{"stream":"c1","offset":7}` → stream: c1, offset: 7).
    static func scalars(ofJSON bytes: UnsafeBufferPointer<UInt8>) -> [String: String] {
        guard bytes.count <= 64 * 1024,
            let object = try? JSONSerialization.jsonObject(with: Data(buffer: bytes), options: [.fragmentsAllowed]) as? [String: Any]
        else { return [:] }
        var scalars: [String: String] = [:]
        for (key, value) in object {
            switch value {
            case let text as String: scalars[key] = text
            case let number as NSNumber: scalars[key] = number.stringValue
            default: continue
            }
        }
        return scalars
    }
}
