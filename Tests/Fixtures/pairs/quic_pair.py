#!/usr/bin/env python3
"""A QUIC pair on PyPI's aioquic (nothing of chaos's own code): newline JSON on bidirectional QUIC streams, each end
writing the TLS secrets of its connections to a key log (the NSS format QUIC stacks write) and logging every message
it reads.

  quic_pair.py server --listen HOST:PORT --dir DIR [--log FILE] [--keylog FILE]
      Makes a CA and a certificate for 127.0.0.1 and localhost with trustme (DIR/ca.pem), then serves: every MSG read
      on a stream is logged (--log, default DIR/server.jsonl: stream, dir "up", seq, and the peer address the
      connection's packets come from then) and answered on the same stream with a MSG of
      the server's own numbering for that stream (downstream). A stream the client finishes is finished back. Prints
      "listening" once it does.
  quic_pair.py client --connect HOST:PORT --ca DIR/ca.pem --log FILE [--keylog FILE] [--streams N] [--messages N]
                      [--interval S] [--name c1] [--stay]
      Opens N streams (named NAME-0, NAME-1, …; one stream is NAME), sends MESSAGES MSG lines on each (seq 1…), logs every MSG it reads
      back (dir "down"), finishes each stream after its last message, waits for the server to finish it too (or
      --timeout), then closes the connection (with --stay: keeps it open, idle, until stopped). Exit 0 when every
      answer came.

aioquic is imported from ~/.cache/chaos-peers/aioquic (make deps installs it there) when that folder exists.
"""
import argparse
import asyncio
import json
import os
import ssl
import sys
import time

# aioquic lives in a folder of its own (make deps), beside the other peers' packages.
PEERS = os.path.expanduser("~/.cache/chaos-peers/aioquic")
if os.path.isdir(PEERS) and PEERS not in sys.path:
    sys.path.insert(0, PEERS)

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamDataReceived

ALPN = ["chaos-lines"]
START = time.monotonic()


class Log:
    def __init__(self, path):
        self.file = open(path, "a", buffering=1)

    def write(self, **fields):
        fields["t"] = round(time.monotonic() - START, 6)
        self.file.write(json.dumps(fields) + "\n")


class Lines:
    """The newline JSON messages of one stream, as its bytes arrive."""

    def __init__(self):
        self.partial = b""

    def feed(self, data):
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        return [json.loads(line) for line in lines if line.strip()]


class ServerProtocol(QuicConnectionProtocol):
    log = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.streams = {}  # stream id -> (Lines, next downstream seq)

    def quic_event_received(self, event):
        if not isinstance(event, StreamDataReceived):
            return
        lines, next_seq = self.streams.get(event.stream_id, (Lines(), 1))
        out = b""
        for message in lines.feed(event.data):
            if message.get("type") != "MSG":
                continue
            # The address the connection's packets come from now: it changes when the client's path does (a
            # rebinding, a handoff), and the connection lives on once the server validated the new path.
            peer = self._quic.get_peer_address()
            self.log.write(stream=message["stream"], dir="up", seq=message["seq"], conn=0, peer=peer[0] if peer else None)
            answer = {"type": "MSG", "stream": message["stream"], "seq": next_seq, "payload": "y" * 40}
            next_seq += 1
            out += (json.dumps(answer) + "\n").encode()
        self.streams[event.stream_id] = (lines, next_seq)
        if out or event.end_stream:
            self._quic.send_stream_data(event.stream_id, out, end_stream=event.end_stream)
            self.transmit()


class ClientProtocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.streams = {}  # stream id -> Lines
        self.answers = {}  # stream id -> count
        self.finished = {}  # stream id -> Future
        self.log = None
        self.terminated = asyncio.get_running_loop().create_future()

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            if not self.terminated.done():
                self.terminated.set_result(event.reason_phrase)
            return
        if not isinstance(event, StreamDataReceived):
            return
        lines = self.streams.setdefault(event.stream_id, Lines())
        for message in lines.feed(event.data):
            if message.get("type") == "MSG":
                self.log.write(stream=message["stream"], dir="down", seq=message["seq"], conn=0)
                self.answers[event.stream_id] = self.answers.get(event.stream_id, 0) + 1
        if event.end_stream and event.stream_id in self.finished and not self.finished[event.stream_id].done():
            self.finished[event.stream_id].set_result(True)


def keylog_file(path):
    return open(path, "a", buffering=1) if path else None


async def run_server(args):
    host, port = args.listen.rsplit(":", 1)
    import trustme

    os.makedirs(args.dir, exist_ok=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(os.path.join(args.dir, "ca.pem"))
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    leaf.private_key_pem.write_to_path(os.path.join(args.dir, "server-key.pem"))
    leaf.cert_chain_pems[0].write_to_path(os.path.join(args.dir, "server-cert.pem"))
    configuration = QuicConfiguration(is_client=False, alpn_protocols=ALPN, secrets_log_file=keylog_file(args.keylog))
    configuration.load_cert_chain(os.path.join(args.dir, "server-cert.pem"), os.path.join(args.dir, "server-key.pem"))
    ServerProtocol.log = Log(args.log or os.path.join(args.dir, "server.jsonl"))
    await serve(host, int(port), configuration=configuration, create_protocol=ServerProtocol)
    print("listening", flush=True)
    await asyncio.Future()


async def run_client(args):
    host, port = args.connect.rsplit(":", 1)
    configuration = QuicConfiguration(
        is_client=True, alpn_protocols=ALPN, secrets_log_file=keylog_file(args.keylog), server_name="localhost"
    )
    # The server makes its CA as it starts: a client started beside it waits for the file.
    deadline = time.monotonic() + 20
    while not os.path.exists(args.ca) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.05)
    configuration.load_verify_locations(args.ca)
    async with connect(host, int(port), configuration=configuration, create_protocol=ClientProtocol) as client:
        client.log = Log(args.log)
        ids = []
        # The next free id stays the same until a stream is used: client-initiated bidirectional ids go up by 4.
        first = client._quic.get_next_available_stream_id()
        for index in range(args.streams):
            stream_id = first + 4 * index
            ids.append((stream_id, args.name if args.streams == 1 else f"{args.name}-{index}"))
            client.finished[stream_id] = asyncio.get_running_loop().create_future()
        for seq in range(1, args.messages + 1):
            for stream_id, name in ids:
                line = json.dumps({"type": "MSG", "stream": name, "seq": seq, "payload": "x" * 40}) + "\n"
                client._quic.send_stream_data(stream_id, line.encode(), end_stream=seq == args.messages)
            client.transmit()
            await asyncio.sleep(args.interval)
        try:
            await asyncio.wait_for(asyncio.gather(*client.finished.values()), args.timeout)
        except asyncio.TimeoutError:
            pass
        answered = sum(client.answers.values())
        client.log.write(event="done", answered=answered, expected=args.messages * args.streams)
        if args.stay:
            # Kept open, idle, until the run stops it (as an app keeps its connection).
            await asyncio.Future()
        return 0 if answered == args.messages * args.streams else 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["server", "client"])
    parser.add_argument("--listen")
    parser.add_argument("--connect")
    parser.add_argument("--dir")
    parser.add_argument("--ca")
    parser.add_argument("--log")
    parser.add_argument("--keylog")
    parser.add_argument("--name", default="c1")
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.01)
    parser.add_argument("--timeout", type=float, default=10)
    parser.add_argument("--stay", action="store_true", help="keep the connection open once done, until stopped")
    args = parser.parse_args()
    if args.role == "server":
        asyncio.run(run_server(args))
    else:
        sys.exit(asyncio.run(run_client(args)))


if __name__ == "__main__":
    main()
