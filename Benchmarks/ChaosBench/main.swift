#if canImport(Glibc)
import Glibc
#endif

/// chaos-bench: the servers and clients `Benchmarks/proxy-bench.sh` measures proxies with.
let usage = """
    usage: chaos-bench SUBCOMMAND --option value ...
      echo-server --port P [--threads N]          NIO echo server (runs until killed)
      glue-proxy  --port P --upstream-port U [--threads N]   bare NIO proxy (runs until killed)
      pingpong    --port P [--count N]            64-byte round trips: p50/p99 in µs
      churn       --port P [--workers 50] [--seconds S]   open/echo/close per second
      idle        --port P --count N --pid PID    memory growth of PID's tree per idle connection
      integrity   --port P [--bytes N]            N bytes both ways through an echo, every byte checked
      udp-echo    --port P                        UDP echo server (runs until killed)
      udp-flood   --port P [--seconds S] [--size 1200] [--window 32]   echoed datagrams per second
      udp-flows   --port P --count N [--hold S]   N flows of one datagram each, held open S seconds
    """

/// Writes `line` to standard error.
func printError(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}

let commandLine = Array(CommandLine.arguments.dropFirst())
guard let subcommand = commandLine.first else {
    print(usage)
    exit(2)
}
do {
    let arguments = try BenchArguments(commandLine.dropFirst())
    switch subcommand {
    case "echo-server": try EchoServer.run(arguments)
    case "glue-proxy": try GlueProxy.run(arguments)
    case "pingpong": try PingPong.run(arguments)
    case "churn": try Churn.run(arguments)
    case "idle": try IdleConnections.run(arguments)
    case "integrity": try Integrity.run(arguments)
    case "udp-echo": try UDPBench.echo(arguments)
    case "udp-flood": try UDPBench.flood(arguments)
    case "udp-flows": try UDPBench.flows(arguments)
    default:
        print(usage)
        exit(2)
    }
} catch let error as BenchError {
    printError("chaos-bench \(subcommand): \(error.description)")
    exit(error.description.hasPrefix("FAILED") ? 1 : 2)
} catch {
    printError("chaos-bench \(subcommand): \(error)")
    exit(2)
}
