import NIOCore
import NIOPosix

/// `echo-server --port P [--threads N]`: a multi-threaded NIO echo server, the upstream of every
/// path the benchmark measures. Runs until killed.
enum EchoServer {
    static func run(_ arguments: BenchArguments) throws {
        let port = try arguments.port()
        let channel = try listener(arguments)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(EchoHandler()) }
            }
            .bind(host: arguments.string("host", default: "127.0.0.1"), port: Int(port))
            .wait()
        print("echo-server listening on \(channel.localAddress.map { "\($0)" } ?? "?")")
        try channel.closeFuture.wait()
    }

    /// A server bootstrap on `--threads` loops (default: one per core), as every bench server listens:
    /// backlog 4096, TCP_NODELAY, half-close allowed.
    static func listener(_ arguments: BenchArguments) throws -> ServerBootstrap {
        let threads = try arguments.integer("threads", default: System.coreCount)
        return ServerBootstrap(group: MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads)))
            .serverChannelOption(ChannelOptions.backlog, value: 4096)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
    }
}
