import Foundation

/// Sends one HTTP/1.1 request to the control API on 127.0.0.1:`port` (blocking: call off the pool);
/// returns the status code and the body.
func apiRequest(_ port: Int, _ method: String, _ path: String, body: String = "") throws -> (Int, String) {
    let socket = try TestSocket.connect(port: port)
    defer { socket.close() }
    let text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    try socket.sendAll(Array(text.utf8))
    let (bytes, _) = socket.receiveUntilEnd()
    let response = String(decoding: bytes, as: UTF8.self)
    let status = Int(response.split(separator: " ").dropFirst().first ?? "") ?? 0
    let payload = response.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, payload)
}
