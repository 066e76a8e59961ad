#!/usr/bin/env python3
"""A TLS terminator in front of a cleartext server (Python's ssl module and asyncio; nothing of chaos's own code).

grpcio speaks TLS through BoringSSL, which has no way to write a key log, so a capture of a grpcio client and a
grpcio server over TLS could not be decrypted. Put this in front of a cleartext server instead: the grpcio client
connects with real TLS (grpc.ssl_channel_credentials), this end answers it with Python's OpenSSL, writes the key
log from its own (server-side) context, and relays the plaintext to the upstream over TCP. A capture of the TLS
port is then grpcio's BoringSSL client against an OpenSSL server, decryptable with --keylog.

  tls_terminator.py --listen HOST:PORT --upstream HOST:PORT --tls-cert PEM [--alpn h2] [--keylog FILE]
                    [--tls-version 1.2|1.3] [--tls-cipher aes128|aes256|chacha20]

--alpn is the server's ALPN list (gRPC needs h2). The version and cipher are pinned here, on the server side
(pair_tls.py: TLS 1.3 suites through OPENSSL_CONF, the script runs itself again with it). Each accepted connection
gets its own upstream connection: bytes are relayed as they come, a peer's end is passed on (the client's
close_notify or FIN as a FIN upstream, the upstream's FIN as close_notify then FIN), a reset or an error on either
side aborts both. SIGTERM or SIGINT ends it.
"""
import argparse
import asyncio
import signal
import sys

from pair_tls import add_arguments, prepare, server_tls


async def pipe(reader, writer, on_end):
    """Copies reader to writer until the reader's end, then calls on_end(); raises on a reset or an error."""
    while True:
        data = await reader.read(65536)
        if not data:
            break
        writer.write(data)
        await writer.drain()
    on_end()


async def relay(args, tls_reader, tls_writer):
    host, port = args.upstream.rsplit(":", 1)
    try:
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
    except OSError:
        tls_writer.transport.abort()
        return

    def upstream_done():  # the upstream server finished: close_notify, then FIN
        tls_writer.close()

    toward_upstream = asyncio.ensure_future(pipe(tls_reader, up_writer, up_writer.write_eof))
    toward_client = asyncio.ensure_future(pipe(up_reader, tls_writer, upstream_done))
    pending = {toward_upstream, toward_client}
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if any(task.exception() is not None for task in done):
                break
    finally:
        for task in pending:
            task.cancel()
        failed = any(task.done() and not task.cancelled() and task.exception() is not None
                     for task in (toward_upstream, toward_client))
        if failed:
            tls_writer.transport.abort()
            up_writer.transport.abort()
        else:
            up_writer.close()
            tls_writer.close()


async def serve(args):
    context = server_tls(args, alpn=args.alpn.split(",") if args.alpn else None)
    host, port = args.listen.rsplit(":", 1)
    server = await asyncio.start_server(lambda r, w: relay(args, r, w), host, int(port), ssl=context, backlog=256)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    async with server:
        await stop.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--alpn", default="h2", help="the ALPN protocols this end accepts, comma-separated ('' for none)")
    add_arguments(parser)
    args = parser.parse_args()
    if not args.tls_cert:
        parser.error("--tls-cert is needed: this end speaks TLS")
    prepare(args)
    asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
