import Foundation
import Glibc
import Testing

@testable import ChaosRunner

/// `ready: connected` asks the kernel which client processes hold a connection to a proxy: a process tree and its
/// sockets, read from `/proc`, on a real loopback connection.
@Suite("Which client processes hold a connection to a proxy")
struct ClientSocketsTests {
    @Test("a connection this process holds to a listening port is found by its remote port and this process's descriptors; others are not")
    func findsThisProcessConnection() throws {
        let (listener, port) = try AgentHTTPTests.listener()
        defer { close(listener) }
        let before = try #require(ClientSockets.establishedInodes(remotePorts: [Int(port)]))
        #expect(before.isEmpty || !ClientSockets.holdsOne(of: before, [getpid()]))
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(client) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0)
        let inodes = try #require(ClientSockets.establishedInodes(remotePorts: [Int(port)]))
        #expect(!inodes.isEmpty, "the client's socket, ESTABLISHED to the port")
        #expect(ClientSockets.holdsOne(of: inodes, ClientSockets.tree(of: getpid())))
        #expect(!ClientSockets.holdsOne(of: inodes, [1]), "not another process's")
        #expect(ClientSockets.establishedInodes(remotePorts: [Int(port) == 1 ? 2 : 1])?.isDisjoint(with: inodes) == true)
    }

    @Test("a process tree holds its children: a shell's command is found below the shell")
    func treeHoldsChildren() throws {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sh")
        child.arguments = ["-c", "sleep 5; true"]
        try child.run()
        defer { child.terminate() }
        var tree: [Int32] = []
        for _ in 0..<200 {
            tree = ClientSockets.tree(of: child.processIdentifier)
            if tree.count > 1 { break }
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(tree.first == child.processIdentifier && tree.count == 2, "the shell and its sleep: \(tree)")
        #expect(ClientSockets.tree(of: getpid()).contains(child.processIdentifier))
    }
}
