import ChaosCore
import Foundation
import Testing

@testable import ChaosControl

/// Sends one HTTP/1.1 request to the control API on 127.0.0.1:`port` (blocking: call off the pool);
/// returns the status code and the body.
func apiRequest(_ port: Int, _ method: String, _ path: String, body: String = "", headers: [String] = []) throws -> (Int, String) {
    // The API answers a request in a task on Swift's cooperative pool (as wide as the cores: 2 here), which the unit
    // lane's blocking tests (tshark, child processes) can hold for seconds on a loaded machine: a quiet fresh-clone run
    // saw an authorized GET go unanswered for the socket's 10 s. The bound is for a broken API, not a pace.
    let socket = try TestSocket.connect(port: port, timeout: 30)
    defer { socket.close() }
    let text =
        "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + headers.map { $0 + "\r\n" }.joined()
        + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    try socket.sendAll(Array(text.utf8))
    let (bytes, _) = socket.receiveUntilEnd()
    let response = String(decoding: bytes, as: UTF8.self)
    let status = Int(response.split(separator: " ").dropFirst().first ?? "") ?? 0
    let payload = response.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, payload)
}

/// Runs `body` off the pool with a proxy harness and a control API over its proxy on 127.0.0.1 (the API's port),
/// then stops both.
func withControlAPI(
    seed: UInt64 = 0,
    runLength: ChaosDuration? = nil,
    _ body: @escaping @Sendable (ProxyHarness, Int) throws -> Void
) async throws {
    let harness = try await ProxyHarness()
    var extras = ControlAPI.Extras()
    extras.runLength = runLength
    let api = ControlAPI(proxies: [harness.proxy], group: harness.group, seed: seed, extras: extras)
    let address = try await api.start(host: "127.0.0.1", port: 0)
    let port = try #require(Int(address.split(separator: ":").last ?? ""))
    try await offPool { try body(harness, port) }
    await api.stop()
    await harness.shutdown()
}
