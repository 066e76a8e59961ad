#!/usr/bin/env python3
"""An independent resumable WebSocket pair (the Python `websockets` library, nothing of chaos's own code), for
the audit's ground truth over WebSocket. The same resume protocol as resumable_pair.py, over RFC 6455 with
permessage-deflate (websockets' default), logging every message each consumer *reads*:

  {"t": 1.23, "stream": "c1", "dir": "down", "seq": 17, "conn": 2, "dup": false}

The client names its stream in an `X-Stream` header of the upgrade request and opens with HELLO{ack}; the server
answers WELCOME{ack}; each side retransmits what the other has not processed and streams MSG messages (the
client's carry `seq`, the server's `n`: the two directions have different fields). Consumers answer ACK{ack}.
Every 10th message carries 66 KB of hex (over 64 KiB: a 64-bit length before deflate), every 7th is sent in
three fragments.
Heartbeats are WebSocket pings (the library answers pongs); a connection silent for --timeout seconds is closed
with a close frame (1001) and the client reconnects.

websockets' Sans-I/O protocol objects do the WebSocket work inside an asyncio.Protocol, so every message is
handled the moment its bytes arrive: what the kernel acknowledged is what was read (nothing waits in a queue).

--drop-on-resume N: on every resume the producer throws away the first N messages the other side had not
processed. --dup-every N: every Nth message is sent twice in a row on the same connection. --send-for S stops
producing S seconds after the stream's first connection.

--reconnect-every S (client): with no proxy in the path nothing cuts a connection, so the client cuts its own every
S seconds, in the middle of a message, as a client killed mid-write would: it writes the first fragment of its next
MSG, then aborts the connection (transport.abort(): no close frame, no close_notify, its kernel's FIN or RST), logs

  {"t": 2.5, "event": "cut", "stream": "c1", "conn": 1}

and reconnects. Before the abort it reads (and logs, sending nothing) what its kernel already holds: bytes that arrived
while the cut was being written are acknowledged by the kernel, often in the cut's own segment, and a client that
dropped them unread would have them counted delivered by any observer of TCP and then resent by the server (one
redelivered that no log shows). The cut message never reached the server whole, so the resume retransmits it, or with
--drop-on-resume N throws it away: a hole in the server's log, a message lost on the wire. (No cut makes a message
once --send-for is over: the last cut messages would otherwise be the highest seqs, and no hole.)

--no-deflate (client) offers no permessage-deflate: messages travel as written, which tshark 4.0 reads whole (it
cannot inflate a compressed message sent in fragments). --keylog, --tls-version and --tls-cipher (pair_tls.py) pin TLS and write the key log for offline decryption.
"""
import argparse
import asyncio
import json
from pair_tls import add_arguments, client_tls, prepare, server_tls
import random
import select
import sys
import time

from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import enable_client_permessage_deflate, enable_server_permessage_deflate
from websockets.frames import Opcode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.uri import parse_uri

# The log, the consumer and the stop signal are the NDJSON pair's own (this file's folder is on sys.path).
from resumable_pair import Consumer, Log, producing, stop_event

class Producer:
    """Outgoing messages of one stream: numbered, kept until the other side says it processed them."""

    def __init__(self, field, args, log, stream):
        self.field = field
        self.args = args
        self.log = log
        self.stream = stream
        self.next_seq = 1
        self.unacked = []  # [(seq, text)]

    def acked(self, ack):
        self.unacked = [(seq, text) for seq, text in self.unacked if seq > ack]

    def resume(self, ack):
        self.acked(ack)
        if self.args.drop_on_resume and self.unacked:
            for seq, _ in self.unacked[: self.args.drop_on_resume]:
                self.log.write(event="dropped", stream=self.stream, seq=seq)
            self.unacked = self.unacked[self.args.drop_on_resume:]
        return list(self.unacked)

    def make(self):
        seq = self.next_seq
        self.next_seq += 1
        size = 33_000 if seq % 10 == 0 else 20  # 66,000 hex characters: over 64 KiB
        payload = random.Random(seq).randbytes(size).hex()
        text = json.dumps({"type": "MSG", self.field: seq, "payload": payload})
        self.unacked.append((seq, text))
        return seq, text


class Connection(asyncio.Protocol):
    """One WebSocket connection driven by a websockets Sans-I/O protocol object."""

    def __init__(self, args, log, conn, is_client, on_hello, stream=None, producer=None, consumer=None):
        self.args, self.log, self.conn, self.is_client = args, log, conn, is_client
        self.on_hello, self.stream = on_hello, stream
        self.producer, self.consumer = producer, consumer
        if is_client:
            self.ws = ClientProtocol(parse_uri(f"{'wss' if args.tls_ca else 'ws'}://{args.connect}/feed"),
                                     extensions=None if args.no_deflate else enable_client_permessage_deflate(None),
                                     max_size=None)
        else:
            self.ws = ServerProtocol(extensions=enable_server_permessage_deflate(None), max_size=None)
        self.transport = None
        self.cutting = False
        self.fragments = []
        self.last_heard = time.monotonic()
        self.closed = asyncio.get_running_loop().create_future()
        self.tasks = [asyncio.ensure_future(self.watch())]

    def connection_made(self, transport):
        self.transport = transport
        if self.is_client:
            request = self.ws.connect()
            request.headers["X-Stream"] = self.stream
            self.ws.send_request(request)
            self.flush()

    def flush(self):
        for data in self.ws.data_to_send():
            if self.transport.is_closing():
                return
            if data:
                self.transport.write(data)
            elif self.transport.can_write_eof():
                self.transport.write_eof()

    def send(self, obj_or_text, fragments=1):
        if self.cutting or self.ws.state is not State.OPEN or self.transport.is_closing():
            return
        data = (obj_or_text if isinstance(obj_or_text, str) else json.dumps(obj_or_text)).encode()
        if fragments == 1:
            self.ws.send_text(data)
        else:
            step = len(data) // fragments + 1
            parts = [data[i:i + step] for i in range(0, len(data), step)]
            self.ws.send_text(parts[0], fin=False)
            for index, part in enumerate(parts[1:], start=2):
                self.ws.send_continuation(part, fin=index == len(parts))
        self.flush()

    def send_message(self, seq, text):
        self.send(text, fragments=3 if seq % 7 == 0 else 1)
        if self.args.dup_every and seq % self.args.dup_every == 0:
            self.send(text)

    def start(self, resend):
        for seq, text in resend:
            self.send_message(seq, text)
        self.tasks.append(asyncio.ensure_future(self.pump()))

    async def pump(self):
        interval = 1.0 / self.args.rate
        next_ping = time.monotonic()
        while not self.closed.done():
            if producing(self.args.send_for, self.producer.stream):
                self.send_message(*self.producer.make())
            if self.is_client and time.monotonic() >= next_ping and self.ws.state is State.OPEN:
                self.ws.send_ping(b"hb")
                self.flush()
                next_ping = time.monotonic() + self.args.heartbeat
            await asyncio.sleep(interval)

    async def watch(self):
        while not self.closed.done():
            if time.monotonic() - self.last_heard > self.args.timeout:
                self.close(1001, "timeout", abort=True)
                return
            await asyncio.sleep(0.1)

    def data_received(self, data):
        self.last_heard = time.monotonic()
        self.ws.receive_data(data)
        for event in self.ws.events_received():
            if isinstance(event, Request):
                self.ws.send_response(self.ws.accept(event))
                self.stream = event.headers.get("X-Stream")
            elif isinstance(event, Response):
                if self.ws.handshake_exc is None:
                    self.send({"type": "HELLO", "ack": self.consumer.processed})
            elif event.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
                self.fragments.append(event.data)
                if event.fin:
                    message, self.fragments = b"".join(self.fragments), []
                    self.handle(json.loads(message))
        self.flush()
        if self.ws.state is State.CLOSED or self.ws.close_expected():
            self.close()

    def handle(self, message):
        kind = message.get("type")
        if kind in ("HELLO", "WELCOME") and self.on_hello:
            self.on_hello(self, message)
        elif kind == "MSG" and self.consumer:
            self.consumer.read(message.get("seq", message.get("n")), self.conn)
            self.send({"type": "ACK", "ack": self.consumer.processed})
        elif kind == "ACK" and self.producer:
            self.producer.acked(message["ack"])

    async def cut(self):
        """--reconnect-every: the first fragment of the next MSG (while producing), then an abort once the kernel holds
        nothing unread (at most 0.1 s): what arrives meanwhile is read and logged, and answered with nothing (a
        message is half-written)."""
        for task in self.tasks:
            task.cancel()
        if (self.producer and self.ws.state is State.OPEN and not self.transport.is_closing()
                and producing(self.args.send_for, self.producer.stream)):
            _, text = self.producer.make()
            data = text.encode()
            self.ws.send_text(data[:len(data) // 3], fin=False)
            self.flush()
        self.cutting = True
        sock = self.transport.get_extra_info("socket")
        for _ in range(50):
            if sock is None or sock.fileno() < 0 or not select.select([sock.fileno()], [], [], 0)[0]:
                break
            await asyncio.sleep(0.002)
        self.close(abort=True)

    def close(self, code=None, reason="", abort=False):
        """Closes the connection (with a close frame when `code` is given). `abort` gives up on a dead connection:
        its socket is closed at once, so nothing that arrives later is acknowledged by our kernel and left unread
        (a plain close would keep the socket open until our pending writes drain, acknowledging what comes in)."""
        for task in self.tasks:
            task.cancel()
        if code is not None and self.ws.state is State.OPEN:
            self.ws.send_close(code, reason)
            self.flush()
        if self.transport is not None:
            self.transport.abort() if abort else self.transport.close()

    def connection_lost(self, exc):
        for task in self.tasks:
            task.cancel()
        if not self.closed.done():
            self.closed.set_result(None)


async def run_server(args):
    log = Log(args.log)
    streams, active = {}, {}
    connections = 0

    def hello(connection, message):
        name = connection.stream
        if name not in streams:
            streams[name] = (Producer("n", args, log, name), Consumer(name, "up", log))
        # One live session per stream: an older one (its client gave up on it) stops producing now.
        if name in active and active[name] is not connection:
            active[name].close(1001, "replaced", abort=True)
        active[name] = connection
        connection.producer, connection.consumer = streams[name]
        connection.on_hello = None
        log.write(event="connected", stream=name, conn=connection.conn)
        connection.send({"type": "WELCOME", "ack": connection.consumer.processed})
        connection.start(connection.producer.resume(message["ack"]))

    def factory():
        nonlocal connections
        connections += 1
        return Connection(args, log, connections, False, hello)

    host, port = args.listen.rsplit(":", 1)
    server = await asyncio.get_running_loop().create_server(factory, host, int(port), ssl=server_tls(args), backlog=256)
    async with server:
        await stop_event().wait()


async def run_client(args):
    log = Log(args.log)
    producer, consumer = Producer("seq", args, log, args.stream), Consumer(args.stream, "down", log)
    host, port = args.connect.rsplit(":", 1)
    stop = stop_event()
    loop = asyncio.get_running_loop()
    conn = 0

    def welcome(connection, message):
        connection.on_hello = None
        connection.start(producer.resume(message["ack"]))

    while not stop.is_set():
        conn += 1
        try:
            _, connection = await loop.create_connection(
                lambda: Connection(args, log, conn, True, welcome, args.stream, producer, consumer), host, int(port), ssl=client_tls(args, alpn=["http/1.1"]), server_hostname=args.server_name if args.tls_ca else None)
        except OSError:
            await asyncio.sleep(0.2)
            continue
        log.write(event="connected", stream=args.stream, conn=conn)
        stopper = asyncio.ensure_future(stop.wait())
        cutter = asyncio.ensure_future(asyncio.sleep(args.reconnect_every)) if args.reconnect_every else None
        await asyncio.wait([connection.closed, stopper] + ([cutter] if cutter else []), return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if cutter is not None and cutter.done() and not stop.is_set() and not connection.closed.done():
            log.write(event="cut", stream=args.stream, conn=conn)
            await connection.cut()
        else:
            connection.close(1000 if stop.is_set() else None, abort=not stop.is_set())
        if cutter is not None:
            cutter.cancel()
        await asyncio.sleep(0.2)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=["server", "client"])
    parser.add_argument("--listen")
    parser.add_argument("--connect")
    parser.add_argument("--stream", default="c1")
    parser.add_argument("--log", required=True)
    parser.add_argument("--rate", type=float, default=40)
    parser.add_argument("--heartbeat", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=2.5)
    parser.add_argument("--send-for", type=float, default=1e9)
    parser.add_argument("--drop-on-resume", type=int, default=0)
    add_arguments(parser)
    parser.add_argument("--dup-every", type=int, default=0)
    parser.add_argument("--no-deflate", action="store_true", help="client: do not offer permessage-deflate")
    parser.add_argument("--reconnect-every", type=float, default=0, help="client: cut the connection mid-message every S seconds")
    args = parser.parse_args()
    prepare(args)
    asyncio.run(run_server(args) if args.role == "server" else run_client(args))


if __name__ == "__main__":
    sys.exit(main())
