#!/usr/bin/env python3
"""A client that uploads as fast as it can through a chaos proxy, and the server it uploads to, around one partition
started through chaos's control API: what the client's own TCP saw while the path was dead (TCP_INFO's bytes_acked
and total_retrans), whether its kernel gave up (TCP_USER_TIMEOUT), and whether every byte it wrote arrived once, on
the same connection. Prints one JSON object.

The client paces itself at about 32 MB/s (a 64 KiB write every 2 ms): far more than a dead path's window, without
spending the machine's cores on loopback copies before and after. Once the partition is over it writes until
everything it wrote before the end has arrived (the same TCP connection carrying on), then closes.

usage: dead-path-peer.py --api HOST:PORT --proxy PORT --server PORT --partition SECONDS [--user-timeout MS]
       [--fault JSON] --out FILE

With --fault (say '{"loss": {"rate": "5%"}}'), that fault is posted for the partition's length instead.
"""
import argparse
import json
import os
import socket
import struct
import threading
import time
import urllib.request

TCP_INFO = 11
TCP_USER_TIMEOUT = 18
CHUNK = b"x" * 65536


def tcp_info(sock):
    """(bytes_acked, total_retrans) from struct tcp_info (bytes_acked at offset 120, total_retrans at 100)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, 232)
    (retrans,) = struct.unpack_from("I", info, 100)
    (acked,) = struct.unpack_from("Q", info, 120)
    return acked, retrans


class Server:
    """Accepts connections on 127.0.0.1:port and counts what each sent, until its FIN."""

    def __init__(self, port):
        self.listener = socket.create_server(("127.0.0.1", port))
        self.received = []
        self.lock = threading.Lock()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.received.append(0)
                index = len(self.received) - 1
            threading.Thread(target=self.drain, args=(conn, index), daemon=True).start()

    def drain(self, conn, index):
        with conn:
            while True:
                try:
                    data = conn.recv(1 << 20)
                except OSError:
                    return
                if not data:
                    return
                with self.lock:
                    self.received[index] += len(data)


def post_fault(api, body):
    request = urllib.request.Request(f"http://{api}/faults", data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--api", required=True)
    parser.add_argument("--proxy", type=int, required=True)
    parser.add_argument("--server", type=int, required=True)
    parser.add_argument("--partition", type=float, required=True)
    parser.add_argument("--user-timeout", type=int, default=0)
    # Another fault of that length instead of the partition (a JSON object as POST /faults takes it, without its 'for').
    parser.add_argument("--fault", default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    server = Server(args.server)
    wait_for(args.api)
    client = socket.create_connection(("127.0.0.1", args.proxy), timeout=10)
    client.settimeout(None)
    if args.user_timeout:
        client.setsockopt(socket.IPPROTO_TCP, TCP_USER_TIMEOUT, args.user_timeout)
    state = {"sent": 0, "error": None, "error_at": None, "stop": False}

    def write():
        while not state["stop"]:
            try:
                state["sent"] += client.send(CHUNK)
                time.sleep(0.002)
            except OSError as error:
                state["error"] = errno_name(error)
                state["error_at"] = time.monotonic()
                return

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    time.sleep(1.0)
    before = tcp_info(client)
    posted = time.monotonic()
    fault = json.loads(args.fault) if args.fault else {"partition": {}}
    for parameters in fault.values():
        parameters["for"] = f"{args.partition}s"
    status = post_fault(args.api, fault)
    answered = time.monotonic()
    # The partition's first moments: what was in flight when the rules went in may still be acknowledged.
    time.sleep(0.3)
    start = tcp_info(client) if state["error"] is None else before
    samples = []
    end_at = posted + args.partition - 0.3
    while time.monotonic() < end_at and state["error"] is None:
        time.sleep(0.1)
        samples.append(tcp_info(client))
    end = samples[-1] if samples else start
    # After the partition, until what was written by its end arrived (a retransmission that backed off through it
    # gets through), or 25 s.
    while time.monotonic() < posted + args.partition:
        time.sleep(0.05)
    written = state["sent"]
    settle_until = time.monotonic() + 25
    while time.monotonic() < settle_until and state["error"] is None and sum(server.received) < written:
        time.sleep(0.05)
    resumed_after = time.monotonic() - posted - args.partition
    state["stop"] = True
    writer.join(timeout=30)
    if state["error"] is None:
        client.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(server.received) < state["sent"]:
            time.sleep(0.05)
        time.sleep(0.2)
    client.close()
    with server.lock:
        received = list(server.received)
    result = {
        "status": status,
        "answered_s": round(answered - posted, 4),
        "acked_before": before[0],
        "acked_during": end[0] - start[0],
        "acked_since_post": end[0] - before[0],
        "retrans_during": end[1] - start[1],
        "during_s": round(len(samples) * 0.1, 1),
        "sent": state["sent"],
        "received": received,
        "error": state["error"],
        "error_after_s": None if state["error_at"] is None else round(state["error_at"] - posted, 3),
        "resumed_after_s": round(resumed_after, 3),
    }
    with open(args.out + ".tmp", "w") as out:
        json.dump(result, out)
    os.rename(args.out + ".tmp", args.out)
    print(json.dumps(result))


def wait_for(api):
    """Until chaos's control API takes connections (10 s at most)."""
    host, port = api.rsplit(":", 1)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def errno_name(error):
    import errno
    return errno.errorcode.get(error.errno, str(error))


if __name__ == "__main__":
    main()
