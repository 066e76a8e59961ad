#!/usr/bin/env python3
"""A UDP datagram pair for chaos's datagram audit: plain Python sockets, one JSON message per datagram.

server: reads datagrams {"type": "DATA", "stream", "seq"}; logs each as {"stream", "dir": "up", "seq", "conn": 1}
(one line each, flushed) and answers each from its own per-stream timeline, {"type": "DATA", "stream", "seq"} with
seq 1, 2, ... to the address it came from (a NAT's mapping, as a real server sees it).
client: first sends {"type": "HELLO"} every 100 ms until the server answers one (as a UDP app learns its server is
there), then sends seq 1, 2, ... every --interval seconds for --send-for seconds from one socket, logs every answer it
reads as {"stream", "dir": "down", "seq", "conn": 1}, and keeps reading until it is stopped. Nothing is resent: an
unreliable transport's receiver logs what it got, and the holes are what the path lost.
"""
import argparse
import json
import signal
import socket
import sys
import threading
import time


def address(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def serve(args):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    sock.bind(address(args.listen))
    log = open(args.log, "a", buffering=1)
    answered = {}
    while True:
        data, peer = sock.recvfrom(65536)
        try:
            message = json.loads(data)
        except ValueError:
            continue
        if message.get("type") == "HELLO":
            sock.sendto(json.dumps({"type": "WELCOME"}).encode(), peer)
            continue
        if message.get("type") != "DATA":
            continue
        stream = message["stream"]
        log.write(json.dumps({"stream": stream, "dir": "up", "seq": message["seq"], "conn": 1}) + "\n")
        answered[stream] = answered.get(stream, 0) + 1
        answer = {"type": "DATA", "stream": stream, "seq": answered[stream]}
        sock.sendto(json.dumps(answer).encode(), peer)


def consume(args):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    sock.bind(("127.0.0.1", 0))
    target = address(args.connect)
    log = open(args.log, "a", buffering=1)
    sock.settimeout(0.1)
    while True:
        sock.sendto(json.dumps({"type": "HELLO", "stream": args.stream}).encode(), target)
        try:
            if json.loads(sock.recv(65536)).get("type") == "WELCOME":
                break
        except (socket.timeout, ValueError, ConnectionRefusedError):
            pass
    sock.settimeout(None)

    def read():
        while True:
            data, _ = sock.recvfrom(65536)
            try:
                message = json.loads(data)
            except ValueError:
                continue
            if message.get("type") == "DATA":
                log.write(json.dumps({"stream": message["stream"], "dir": "down", "seq": message["seq"], "conn": 1}) + "\n")

    threading.Thread(target=read, daemon=True).start()
    start = time.monotonic()
    seq = 0
    while time.monotonic() - start < args.send_for:
        seq += 1
        sock.sendto(json.dumps({"type": "DATA", "stream": args.stream, "seq": seq}).encode(), target)
        next_at = start + seq * args.interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    signal.pause()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["server", "client"])
    parser.add_argument("--listen")
    parser.add_argument("--connect")
    parser.add_argument("--stream", default="c1")
    parser.add_argument("--send-for", type=float, default=5)
    parser.add_argument("--interval", type=float, default=0.01)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(args) if args.role == "server" else consume(args)


if __name__ == "__main__":
    main()
