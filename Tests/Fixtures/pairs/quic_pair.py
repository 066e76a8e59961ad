#!/usr/bin/env python3
"""A QUIC pair on PyPI's aioquic (nothing of chaos's own code): newline JSON on bidirectional QUIC streams, each end
writing the TLS secrets of its connections to a key log (the NSS format QUIC stacks write) and logging every message
it reads.

  quic_pair.py server --listen HOST:PORT --dir DIR [--log FILE] [--keylog FILE] [--http3] [--no-migration]
                      [--idle-timeout S]
      Makes a CA and a certificate for 127.0.0.1 and localhost with trustme (DIR/ca.pem), then serves: every MSG read
      on a stream is logged (--log, default DIR/server.jsonl: stream, dir "up", seq, the connection's number, and the
      peer address the connection's packets come from then) and answered on the same stream with a MSG of the server's
      own numbering for that stream name (downstream; it goes on across the client's connections). A stream the client
      finishes is finished back. Prints "listening" once it does.
  quic_pair.py client --connect HOST:PORT --ca DIR/ca.pem --log FILE [--keylog FILE] [--streams N] [--messages N]
                      [--interval S] [--name c1] [--stay] [--http3] [--reconnect] [--idle-timeout S]
      Opens N streams (named NAME-0, NAME-1, …; one stream is NAME), sends MESSAGES MSG lines on each (seq 1…), logs every MSG it reads
      back (dir "down"), finishes each stream after its last message, waits for the server to finish it too (or
      --timeout), then closes the connection (with --stay: keeps it open, idle, until stopped). Exit 0 when every
      answer came.

  With --http3 (both ends), the same messages ride HTTP/3 (aioquic's H3Connection, ALPN h3): each stream is a request,
  POST /lines?stream=NAME with an NDJSON body the client streams, answered by a 200 whose NDJSON body the server
  streams back line by line; the server logs each request's path ("request"), the client each response's status.

  --no-migration (server): takes a connection's packets from the address it first came from only, as a server behind a
  load balancer that routes by address and port rather than by connection ID: a client whose address changes (a NAT
  rebinding, a handoff) is never heard again on that connection, which dies at its idle timeout.
  --reconnect (client): the app's own resume: when its connection ends (its idle timeout: nothing came back), it
  connects again and sends each stream's messages from the first the server has not answered (the server answers
  every message it reads, in order), until every message was answered or --timeout.
  --idle-timeout S: QUIC's idle timeout of that end (aioquic's default is 60 s).

aioquic is imported from ~/.cache/chaos-peers/aioquic (make deps installs it there) when that folder exists.
"""
import argparse
import asyncio
import itertools
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
from aioquic.h3.connection import H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
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


class Server(QuicConnectionProtocol):
    """What both servers share: the log, the connection's number, the numbering of each stream name's answers across
    connections, and --no-migration."""

    log = None
    pinned = False
    numbers = itertools.count()
    answered = {}  # stream name -> the last downstream seq it was given

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.conn = next(Server.numbers)
        self.first_address = None

    def datagram_received(self, data, addr):
        if self.pinned:
            if self.first_address is None:
                self.first_address = addr
            elif addr != self.first_address:
                return  # another address: a load balancer that routes by address sends it elsewhere
        super().datagram_received(data, addr)

    def answers(self, lines, data):
        """Logs each MSG read and returns the answers, newline JSON."""
        out = b""
        for message in lines.feed(data):
            if message.get("type") != "MSG":
                continue
            # The address the connection's packets come from now: it changes when the client's path does (a
            # rebinding, a handoff), and the connection lives on once the server validated the new path.
            peer = self._quic.get_peer_address()
            name = message["stream"]
            self.log.write(stream=name, dir="up", seq=message["seq"], conn=self.conn, peer=peer[0] if peer else None)
            Server.answered[name] = Server.answered.get(name, 0) + 1
            answer = {"type": "MSG", "stream": name, "seq": Server.answered[name], "payload": "y" * 40}
            out += (json.dumps(answer) + "\n").encode()
        return out


class ServerProtocol(Server):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.streams = {}  # stream id -> Lines

    def quic_event_received(self, event):
        if not isinstance(event, StreamDataReceived):
            return
        out = self.answers(self.streams.setdefault(event.stream_id, Lines()), event.data)
        if out or event.end_stream:
            self._quic.send_stream_data(event.stream_id, out, end_stream=event.end_stream)
            self.transmit()


class H3ServerProtocol(Server):
    """The server over HTTP/3: each request's body lines answered on its response's body, as the raw server does."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.http = H3Connection(self._quic)
        self.streams = {}  # stream id -> Lines

    def quic_event_received(self, event):
        for h3 in self.http.handle_event(event):
            if isinstance(h3, HeadersReceived) and h3.stream_id not in self.streams:
                self.streams[h3.stream_id] = Lines()
                self.log.write(request=dict(h3.headers).get(b":path", b"").decode(), conn=self.conn)
                self.http.send_headers(h3.stream_id, [(b":status", b"200"), (b"content-type", b"application/x-ndjson")])
                if h3.stream_ended:
                    self.http.send_data(h3.stream_id, b"", end_stream=True)
            elif isinstance(h3, DataReceived) and h3.stream_id in self.streams:
                out = self.answers(self.streams[h3.stream_id], h3.data)
                if out or h3.stream_ended:
                    self.http.send_data(h3.stream_id, out, end_stream=h3.stream_ended)
        self.transmit()


class ClientProtocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.streams = {}  # stream id -> Lines
        self.answers = {}  # stream id -> count
        self.by_name = None  # stream name -> answers read, across connections (--reconnect)
        self.finished = {}  # stream id -> Future
        self.log = None
        self.conn = 0
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
                self.log.write(stream=message["stream"], dir="down", seq=message["seq"], conn=self.conn)
                self.answers[event.stream_id] = self.answers.get(event.stream_id, 0) + 1
                if self.by_name is not None:
                    self.by_name[message["stream"]] = self.by_name.get(message["stream"], 0) + 1
        if event.end_stream and event.stream_id in self.finished and not self.finished[event.stream_id].done():
            self.finished[event.stream_id].set_result(True)


class H3ClientProtocol(ClientProtocol):
    """The client over HTTP/3: the raw client's bookkeeping, fed by the response bodies."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.http = H3Connection(self._quic)

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            return super().quic_event_received(event)
        for h3 in self.http.handle_event(event):
            if isinstance(h3, HeadersReceived):
                self.log.write(status=dict(h3.headers).get(b":status", b"").decode(), conn=self.conn)
            elif isinstance(h3, DataReceived):
                super().quic_event_received(StreamDataReceived(data=h3.data, end_stream=h3.stream_ended, stream_id=h3.stream_id))
            if h3.stream_ended and h3.stream_id in self.finished and not self.finished[h3.stream_id].done():
                self.finished[h3.stream_id].set_result(True)


def keylog_file(path):
    return open(path, "a", buffering=1) if path else None


def configure(args, is_client):
    configuration = QuicConfiguration(
        is_client=is_client,
        alpn_protocols=["h3"] if args.http3 else ALPN,
        secrets_log_file=keylog_file(args.keylog),
        server_name="localhost" if is_client else None,
    )
    if args.idle_timeout:
        configuration.idle_timeout = args.idle_timeout
    return configuration


async def run_server(args):
    host, port = args.listen.rsplit(":", 1)
    import trustme

    os.makedirs(args.dir, exist_ok=True)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(os.path.join(args.dir, "ca.pem"))
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    leaf.private_key_pem.write_to_path(os.path.join(args.dir, "server-key.pem"))
    leaf.cert_chain_pems[0].write_to_path(os.path.join(args.dir, "server-cert.pem"))
    configuration = configure(args, is_client=False)
    configuration.load_cert_chain(os.path.join(args.dir, "server-cert.pem"), os.path.join(args.dir, "server-key.pem"))
    Server.log = Log(args.log or os.path.join(args.dir, "server.jsonl"))
    Server.pinned = args.no_migration
    protocol = H3ServerProtocol if args.http3 else ServerProtocol
    await serve(host, int(port), configuration=configuration, create_protocol=protocol)
    print("listening", flush=True)
    await asyncio.Future()


def open_streams(client, args, names):
    """A stream per name (a request each with --http3); their ids."""
    ids = []
    # The next free id stays the same until a stream is used: client-initiated bidirectional ids go up by 4.
    first = client._quic.get_next_available_stream_id()
    for index, name in enumerate(names):
        stream_id = first + 4 * index
        ids.append((stream_id, name))
        client.finished[stream_id] = asyncio.get_running_loop().create_future()
        if args.http3:
            client.http.send_headers(
                stream_id,
                [
                    (b":method", b"POST"),
                    (b":scheme", b"https"),
                    (b":authority", b"localhost"),
                    (b":path", f"/lines?stream={name}".encode()),
                    (b"content-type", b"application/x-ndjson"),
                ],
            )
    return ids


def send(client, args, stream_id, name, seq):
    line = (json.dumps({"type": "MSG", "stream": name, "seq": seq, "payload": "x" * 40}) + "\n").encode()
    if args.http3:
        client.http.send_data(stream_id, line, end_stream=seq == args.messages)
    else:
        client._quic.send_stream_data(stream_id, line, end_stream=seq == args.messages)


async def run_client(args):
    host, port = args.connect.rsplit(":", 1)
    configuration = configure(args, is_client=True)
    # The server makes its CA as it starts: a client started beside it waits for the file.
    deadline = time.monotonic() + 20
    while not os.path.exists(args.ca) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.05)
    configuration.load_verify_locations(args.ca)
    protocol = H3ClientProtocol if args.http3 else ClientProtocol
    names = [args.name if args.streams == 1 else f"{args.name}-{index}" for index in range(args.streams)]
    log = Log(args.log)
    expected = args.messages * args.streams
    if args.reconnect:
        answered = {name: 0 for name in names}
        give_up = time.monotonic() + args.timeout + args.messages * args.interval
        for conn in itertools.count():
            if min(answered.values()) >= args.messages or time.monotonic() > give_up:
                break
            async with connect(host, int(port), configuration=configuration, create_protocol=protocol) as client:
                client.log, client.conn, client.by_name = log, conn, answered
                ids = open_streams(client, args, names)
                # Resumed from the first message each stream's server has not answered.
                next_seq = {name: answered[name] + 1 for name in names}
                while not client.terminated.done() and any(next_seq[name] <= args.messages for name in names):
                    for stream_id, name in ids:
                        if next_seq[name] <= args.messages:
                            send(client, args, stream_id, name, next_seq[name])
                            next_seq[name] += 1
                    client.transmit()
                    await asyncio.sleep(args.interval)
                while not client.terminated.done() and min(answered.values()) < args.messages and time.monotonic() < give_up:
                    await asyncio.sleep(0.05)
                if min(answered.values()) >= args.messages:
                    log.write(event="done", answered=sum(answered.values()), expected=expected, connections=conn + 1)
                    if args.stay:
                        await asyncio.Future()
                    return 0
        log.write(event="done", answered=sum(answered.values()), expected=expected)
        return 1
    async with connect(host, int(port), configuration=configuration, create_protocol=protocol) as client:
        client.log = log
        ids = open_streams(client, args, names)
        for seq in range(1, args.messages + 1):
            for stream_id, name in ids:
                send(client, args, stream_id, name, seq)
            client.transmit()
            await asyncio.sleep(args.interval)
        try:
            await asyncio.wait_for(asyncio.gather(*client.finished.values()), args.timeout)
        except asyncio.TimeoutError:
            pass
        answered = sum(client.answers.values())
        client.log.write(event="done", answered=answered, expected=expected)
        if args.stay:
            # Kept open, idle, until the run stops it (as an app keeps its connection).
            await asyncio.Future()
        return 0 if answered == expected else 1


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
    parser.add_argument("--http3", action="store_true", help="requests and responses of HTTP/3 (ALPN h3) on the streams")
    parser.add_argument("--no-migration", action="store_true", help="server: hear a connection from its first address only")
    parser.add_argument("--reconnect", action="store_true", help="client: connect again when the connection ends, and resume")
    parser.add_argument("--idle-timeout", type=float, help="QUIC idle timeout in seconds")
    args = parser.parse_args()
    if args.role == "server":
        asyncio.run(run_server(args))
    else:
        sys.exit(asyncio.run(run_client(args)))


if __name__ == "__main__":
    main()
