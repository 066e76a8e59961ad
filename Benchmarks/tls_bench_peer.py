#!/usr/bin/env python3
"""TLS endpoints for Benchmarks/tls-bench.sh: one server and three clients, all on 127.0.0.1.

  tls_bench_peer.py certs DIR
      A trustme CA (DIR/ca.pem) and a leaf for localhost and 127.0.0.1 signed by it
      (DIR/server.pem, DIR/server-key.pem). ECDSA P-256, trustme's default.
  tls_bench_peer.py server --port P --dir DIR
      A thread per connection, blocking ssl sockets (OpenSSL releases the GIL during the crypto),
      TLS 1.2/1.3, no session tickets (no client here resumes). The first byte a client sends picks the
      mode: 'E' echoes every byte back (the 'E' too) until EOF; 'S' is a sink that counts bytes until the
      one byte 0xFF ends the stream (every other byte is 0), then answers the count as "<n>\\n".
  tls_bench_peer.py tput --port P --ca CA --seconds N [--chunk BYTES]
      One TLS connection writing BYTES-sized zero chunks to a sink for N seconds, then the end byte;
      the time runs until the sink's count arrives, so bytes buffered along the path are not counted
      as sent. Prints mb_per_s= (10^6 bytes) bytes= seconds= tls=VERSION/CIPHER (as the client saw it).
  tls_bench_peer.py churn --port P --ca CA --seconds N --workers W
      W processes, each opening a TLS connection (a full handshake: no session is ever reused),
      echoing 16 bytes and closing, in a loop for N seconds. Prints conns_per_s= conns= errors=.
  tls_bench_peer.py idle --port P --ca CA --count N --pid PID [--settle S]
      VmRSS of PID, then N TLS connections each completing its handshake and one 16-byte echo (so a
      proxy has finished the upstream handshake too), S seconds' pause, VmRSS again; then closes them.
      Prints kb_per_conn= rss_before_kb= rss_after_kb= conns=.

Every client verifies the server's certificate against --ca with SNI --server-name (localhost).
"""
import argparse
import multiprocessing
import os
import socket
import ssl
import sys
import threading
import time


def client_context(ca):
    ctx = ssl.create_default_context(cafile=ca)  # verifies the chain and the name
    return ctx


def connect(ctx, port, server_name, timeout=10.0):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        return ctx.wrap_socket(raw, server_hostname=server_name)
    except BaseException:
        raw.close()
        raise


def recv_exactly(sock, n):
    data = bytearray()
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise ConnectionError(f"connection closed after {len(data)} of {n} bytes")
        data += part
    return bytes(data)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


# ---------------------------------------------------------------------------------------------
def cmd_certs(args):
    import trustme

    os.makedirs(args.dir, exist_ok=True)
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    ca.cert_pem.write_to_path(os.path.join(args.dir, "ca.pem"))
    leaf.private_key_pem.write_to_path(os.path.join(args.dir, "server-key.pem"))
    leaf.cert_chain_pems[0].write_to_path(os.path.join(args.dir, "server.pem"))
    for extra in leaf.cert_chain_pems[1:]:
        extra.write_to_path(os.path.join(args.dir, "server.pem"), append=True)


def serve_connection(ctx, raw):
    try:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with ctx.wrap_socket(raw, server_side=True) as sock:
            buf = bytearray(1 << 14)  # a TLS record's worth: SSL_read returns one record at most
            view = memoryview(buf)
            n = sock.recv_into(buf)
            if n == 0:
                return
            if buf[0] == ord("E"):
                while n:
                    sock.sendall(view[:n])
                    n = sock.recv_into(buf)
            elif buf[0] == ord("S"):
                total = n - 1
                while not (n and buf[n - 1] == 0xFF and total > 0):
                    n = sock.recv_into(buf)
                    if n == 0:
                        return  # the client went away before the end byte: no answer
                    total += n
                sock.sendall(b"%d\n" % (total - 1))  # the zero bytes, without the end byte
                while sock.recv_into(buf):  # wait for the client to close
                    pass
    except (OSError, ssl.SSLError):
        pass
    finally:
        raw.close()


def cmd_server(args):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(args.dir, "server.pem"), os.path.join(args.dir, "server-key.pem"))
    ctx.num_tickets = 0
    threading.stack_size(256 * 1024)  # a thousand idle connections are a thousand threads
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(4096)
    print(f"listening on 127.0.0.1:{args.port}", flush=True)
    while True:
        raw, _ = listener.accept()
        threading.Thread(target=serve_connection, args=(ctx, raw), daemon=True).start()


# ---------------------------------------------------------------------------------------------
def cmd_tput(args):
    ctx = client_context(args.ca)
    sock = connect(ctx, args.port, args.server_name, timeout=args.seconds + 30)
    chunk = memoryview(bytes(args.chunk))
    sent = 0
    sock.sendall(b"S")
    start = time.monotonic()
    deadline = start + args.seconds
    while time.monotonic() < deadline:
        sock.sendall(chunk)
        sent += len(chunk)
    sock.sendall(b"\xff")
    line = bytearray()
    while not line.endswith(b"\n"):
        part = sock.recv(64)
        if not part:
            raise ConnectionError("the sink closed without a count")
        line += part
    elapsed = time.monotonic() - start
    sock_version, sock_cipher = sock.version(), sock.cipher()
    sock.close()
    received = int(line)
    if received != sent:
        raise RuntimeError(f"sent {sent} bytes but the sink counted {received}")
    cipher = sock_cipher[0] if sock_cipher else "?"
    print(f"mb_per_s={received / elapsed / 1e6:.1f} bytes={received} seconds={elapsed:.3f} tls={sock_version}/{cipher}")


def churn_worker(port, ca, server_name, seconds, start_at, results):
    ctx = client_context(ca)
    message = b"E" + b"x" * 15
    conns = errors = 0
    while time.time() < start_at:
        time.sleep(0.001)
    deadline = start_at + seconds
    while time.time() < deadline:
        try:
            sock = connect(ctx, port, server_name)
            try:
                sock.sendall(message)
                if recv_exactly(sock, len(message)) != message:
                    raise RuntimeError("echo mismatch")
            finally:
                sock.close()
            conns += 1
        except (OSError, ssl.SSLError, RuntimeError, ConnectionError) as error:
            errors += 1
            if errors <= 3:
                print(f"churn worker: {error!r}", file=sys.stderr)
            time.sleep(0.01)
    results.put((conns, errors))


def cmd_churn(args):
    results = multiprocessing.Queue()
    start_at = time.time() + 0.5  # let every worker start (and import) before the clock runs
    workers = [
        multiprocessing.Process(
            target=churn_worker, args=(args.port, args.ca, args.server_name, args.seconds, start_at, results)
        )
        for _ in range(args.workers)
    ]
    for worker in workers:
        worker.start()
    conns = errors = 0
    for _ in workers:
        c, e = results.get(timeout=args.seconds + 60)
        conns += c
        errors += e
    for worker in workers:
        worker.join(timeout=10)
    if conns == 0:
        raise RuntimeError(f"no connection completed ({errors} errors)")
    print(f"conns_per_s={conns / args.seconds:.0f} conns={conns} errors={errors}")


def cmd_idle(args):
    ctx = client_context(args.ca)
    message = b"E" + b"i" * 15
    time.sleep(args.settle)
    before = rss_kb(args.pid)
    socks = []
    try:
        for _ in range(args.count):
            sock = connect(ctx, args.port, args.server_name, timeout=30)
            socks.append(sock)
            sock.sendall(message)
            if recv_exactly(sock, len(message)) != message:
                raise RuntimeError("echo mismatch")
        time.sleep(args.settle)
        after = rss_kb(args.pid)
    finally:
        for sock in socks:
            sock.close()
    per = (after - before) / args.count
    print(f"kb_per_conn={per:.1f} rss_before_kb={before} rss_after_kb={after} conns={args.count}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("certs")
    p.add_argument("dir")
    p.set_defaults(run=cmd_certs)
    p = sub.add_parser("server")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--dir", required=True)
    p.set_defaults(run=cmd_server)
    for name, run in (("tput", cmd_tput), ("churn", cmd_churn), ("idle", cmd_idle)):
        p = sub.add_parser(name)
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--ca", required=True)
        p.add_argument("--server-name", default="localhost")
        p.set_defaults(run=run)
        if name == "tput":
            p.add_argument("--seconds", type=float, default=3)
            p.add_argument("--chunk", type=int, default=1 << 16)
        elif name == "churn":
            p.add_argument("--seconds", type=float, default=3)
            p.add_argument("--workers", type=int, default=8)
        else:
            p.add_argument("--count", type=int, default=1000)
            p.add_argument("--pid", type=int, required=True)
            p.add_argument("--settle", type=float, default=1.0)
    args = parser.parse_args()
    try:
        args.run(args)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as error:  # one line on stderr, exit 1: the shell script reports it
        print(f"{args.command}: {error!r}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
