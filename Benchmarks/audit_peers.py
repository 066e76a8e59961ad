#!/usr/bin/env python3
"""The audit-throughput benchmark's two peers (Benchmarks/audit-throughput.sh).

  audit_peers.py sink PORT ANSWER      accepts one connection, writes the file ANSWER to it (a 101 upgrade, HTTP/2
                                       SETTINGS: what the protocol's server says first), reads until EOF, closes.
  audit_peers.py produce PORT FILE N   connects, sends FILE as fast as the path takes it (dropping whatever comes
                                       back), half-closes, and waits for the far end's close: the time from connect
                                       to that close covers every byte reaching the sink. Prints N / seconds.

Both read and write in large blocks, so that the peers cost the machine little next to the path measured."""
import socket
import sys
import threading
import time


def sink(port, answer_path):
    with open(answer_path, "rb") as handle:
        answer = handle.read()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(1)
    print("listening", flush=True)
    conn, _ = server.accept()
    server.close()
    if answer:
        conn.sendall(answer)
    buffer = bytearray(1 << 20)
    while conn.recv_into(buffer):
        pass
    conn.close()


def produce(port, path, messages):
    with open(path, "rb") as handle:
        data = handle.read()
    start = time.monotonic()
    sock = socket.create_connection(("127.0.0.1", port))
    closed = threading.Event()

    def drain():
        buffer = bytearray(1 << 16)
        while sock.recv_into(buffer):
            pass
        closed.set()

    threading.Thread(target=drain, daemon=True).start()
    sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)
    if not closed.wait(600):
        sys.exit("the far end did not close within 600 s")
    elapsed = time.monotonic() - start
    sock.close()
    print("%.0f" % (messages / elapsed))


if __name__ == "__main__":
    if sys.argv[1] == "sink":
        sink(int(sys.argv[2]), sys.argv[3])
    else:
        produce(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
