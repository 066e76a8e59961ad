#!/usr/bin/env python3
"""How a TLS connection ended, as the client's own ssl module (OpenSSL) saw it (nothing of chaos's own code).

  tls_end.py server --listen HOST:PORT --tls-cert PEM [--client-ca CA]
                                                               a TLS server that holds each connection open
  tls_end.py client --connect HOST:PORT --tls-ca CA --log FILE  reads until the end, then writes to FILE:
      "clean"      the peer sent close_notify, then FIN (read returned b"")
      "truncated"  a FIN with no close_notify (ssl.SSLEOFError: EOF occurred in violation of protocol)
      "reset"      a TCP reset
  --reset (either role)  once the client's first line is through, that end resets its TCP connection (SO_LINGER 0,
                         no close_notify), as a peer whose socket closed with bytes unread does; the client then
                         writes "reset sent"
"""
import argparse
import asyncio
import signal
import socket
import ssl
import struct
import sys
import time


def reset(sock):
    """Closes `sock` with a TCP reset: no close_notify, no FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


async def serve(args):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.tls_cert)
    if args.client_ca:  # mTLS: a client without a certificate from this CA is refused
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=args.client_ca)

    async def hold(reader, writer):
        if args.reset:
            await reader.readline()
            reset(writer.get_extra_info("socket"))
            writer.transport.abort()
            return
        await reader.read()  # until the client's end
        writer.close()

    host, port = args.listen.rsplit(":", 1)
    server = await asyncio.start_server(hold, host, int(port), ssl=context)
    async with server:
        await server.serve_forever()


TCP_CLOSE = 7  # tcp_info's state once a RST arrived (after a FIN, CLOSE_WAIT)


def tcp_state(sock):
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


def client(args):
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])
    context = ssl.create_default_context(cafile=args.tls_ca)
    host, port = args.connect.rsplit(":", 1)
    end = "none"
    try:
        with context.wrap_socket(socket.create_connection((host, int(port))), server_hostname="localhost",
                                 suppress_ragged_eofs=False) as tls:
            tls.sendall(b"hello\n")
            if args.reset:
                time.sleep(0.5)  # the line reaches the server first
                reset(tls)
                end = "reset sent"
            else:
                try:
                    while True:
                        if not tls.recv(4096):
                            end = "clean"
                            break
                except ssl.SSLEOFError:
                    # OpenSSL reports a RST it meets in a read as an EOF too: the socket's state tells them apart.
                    end = "reset" if tcp_state(tls) == TCP_CLOSE else "truncated"
    except ConnectionResetError:
        end = "reset"
    except (ssl.SSLError, OSError) as error:
        end = f"failed: {error}"
    with open(args.log, "w") as log:
        log.write(end + "\n")
    signal.sigwait([signal.SIGTERM, signal.SIGINT])  # a pair's client lives until the run stops it


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["server", "client"])
    parser.add_argument("--listen")
    parser.add_argument("--connect")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-ca")
    parser.add_argument("--log")
    parser.add_argument("--client-ca", help="server: require a client certificate from this CA (mTLS)")
    parser.add_argument("--reset", action="store_true", help="reset the connection once the first line is through")
    args = parser.parse_args()
    if args.role == "server":
        asyncio.run(serve(args))
    else:
        client(args)


if __name__ == "__main__":
    sys.exit(main())
