#!/usr/bin/env python3
"""An independent resumable NDJSON pair (nothing of chaos's own code), for the audit's ground truth.

Both sides stream numbered messages to each other over one TCP connection and log every message
they *read* (the consumer's view), so a test can compare the audit with what was really received:

  {"t": 1.23, "stream": "c1", "dir": "down", "seq": 17, "conn": 2, "dup": false}

The protocol: the client opens with HELLO{ack}, the server answers WELCOME{ack}, where ack is the
highest seq the sender has processed of the other direction; each side then retransmits what the
other has not processed and goes on streaming MSG{seq}. Consumers send cumulative ACK{ack} and drop
what they already processed (logged with dup true). Heartbeats: the client sends PING every
--heartbeat seconds, the server answers PONG; either side closes a connection that was silent for
--timeout seconds (how a half-open partition is noticed), and the client reconnects.

--drop-on-resume N makes the producer buggy: on every resume it throws away the first N messages
the other side had not processed instead of retransmitting them. --send-for S stops producing S
seconds after the stream's first connection (the pair then only heartbeats), so that every message has arrived when the run stops.
--quit-after-close makes the client stop for good (status 0) once its connection ends, as a client that takes a
heartbeat timeout for a normal close does.
"""
import argparse
import asyncio
import json
import signal
import socket
import struct
from pair_tls import add_arguments, client_tls, prepare, server_tls
import sys
import time

START = time.monotonic()
# When each stream first produced: its first connection (a client's own, or the first the server accepted for it).
FIRST_PRODUCED = {}


def producing(send_for, stream):
    """Whether --send-for still allows a message of `stream`: S seconds from that stream's first connection, not from
    the process's start (a Python peer on a loaded machine can take seconds to start) nor from the server's first
    connection (a second client that took seconds longer to start would otherwise get nothing from the server)."""
    now = time.monotonic()
    first = FIRST_PRODUCED.setdefault(stream, now)
    return now - first < send_for


class Log:
    def __init__(self, path):
        self.file = open(path, "a", buffering=1)

    def write(self, **fields):
        fields["t"] = round(time.monotonic() - START, 6)
        self.file.write(json.dumps(fields) + "\n")


class Producer:
    """Outgoing messages of one stream: numbered, kept until the other side says it processed them."""

    def __init__(self, stream, args, log):
        self.stream = stream
        self.args = args
        self.log = log
        self.next_seq = 1
        self.unacked = []  # [(seq, line)]

    def acked(self, ack):
        self.unacked = [(seq, line) for seq, line in self.unacked if seq > ack]

    def resume(self, ack):
        self.acked(ack)
        if self.args.drop_on_resume and self.unacked:
            for seq, _ in self.unacked[: self.args.drop_on_resume]:
                self.log.write(event="dropped", stream=self.stream, seq=seq)
            self.unacked = self.unacked[self.args.drop_on_resume:]
        return [line for _, line in self.unacked]

    def make(self):
        seq = self.next_seq
        self.next_seq += 1
        line = json.dumps({"type": "MSG", "stream": self.stream, "seq": seq, "payload": "x" * 40}) + "\n"
        self.unacked.append((seq, line))
        return line


class Consumer:
    """Incoming messages of one stream: processed once, every read logged."""

    def __init__(self, stream, direction, log):
        self.stream = stream
        self.direction = direction
        self.log = log
        self.processed = 0
        self.seen = set()

    def read(self, seq, conn):
        dup = seq in self.seen
        self.log.write(stream=self.stream, dir=self.direction, seq=seq, conn=conn, dup=dup)
        if not dup:
            self.seen.add(seq)
            self.processed = max(self.processed, seq)


class Connection(asyncio.Protocol):
    """One TCP connection: every line is handled the moment its bytes arrive (nothing waits unread in a
    buffer of ours, so what the kernel acknowledged is what was processed), heartbeats, and the producer."""

    def __init__(self, args, log, conn, is_client, on_hello=None, producer=None, consumer=None):
        self.args, self.log, self.conn, self.is_client = args, log, conn, is_client
        self.on_hello = on_hello
        self.producer, self.consumer = producer, consumer
        self.transport = None
        self.partial = b""
        self.last_heard = time.monotonic()
        self.closed = asyncio.get_running_loop().create_future()
        self.tasks = []

    def connection_made(self, transport):
        self.transport = transport

    def send(self, obj_or_line):
        if self.transport is None or self.transport.is_closing():
            return
        line = obj_or_line if isinstance(obj_or_line, str) else json.dumps(obj_or_line) + "\n"
        self.transport.write(line.encode())

    def start(self, resend):
        for line in resend:
            self.send(line)
        self.tasks.append(asyncio.ensure_future(self.pump()))
        self.tasks.append(asyncio.ensure_future(self.watch()))

    async def pump(self):
        interval = 1.0 / self.args.rate
        next_ping = time.monotonic()
        while not self.closed.done():
            if producing(self.args.send_for, self.producer.stream):
                self.send(self.producer.make())
            if self.is_client and time.monotonic() >= next_ping:
                self.send({"type": "PING"})
                next_ping = time.monotonic() + self.args.heartbeat
            await asyncio.sleep(interval)

    async def watch(self):
        while not self.closed.done():
            if time.monotonic() - self.last_heard > self.args.timeout:
                self.abandon()
                return
            await asyncio.sleep(0.1)

    def data_received(self, data):
        self.last_heard = time.monotonic()
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            try:
                self.handle(json.loads(line))
            except (ValueError, KeyError):
                self.close()
                return

    def handle(self, message):
        kind = message.get("type")
        if kind == "HELLO" and self.on_hello:
            self.on_hello(self, message)
        elif kind == "WELCOME" and self.on_hello:
            self.on_hello(self, message)
        elif kind == "MSG" and self.consumer:
            self.consumer.read(message["seq"], self.conn)
            self.send({"type": "ACK", "stream": self.consumer.stream, "ack": self.consumer.processed})
        elif kind == "ACK" and self.producer:
            self.producer.acked(message["ack"])
        elif kind == "PING":
            self.send({"type": "PONG"})

    def close(self):
        for task in self.tasks:
            task.cancel()
        if self.transport is not None:
            self.transport.close()

    def abandon(self):
        """Drops a connection given up on (silent past --timeout, or replaced by a newer one): what its kernel
        already holds is read and handled first (cleartext), then the socket is closed at once with a reset. A
        graceful close() keeps the socket open while asyncio flushes what we still had to send, and transport.abort()
        closes it only on the loop's next turn: either way its kernel meanwhile acknowledges bytes nobody will read
        (the proxy's flush as a partition lifts, a resend answering our WELCOME), delivered as far as any TCP
        observer can tell, never read by this consumer. Closing in the same step as the last read leaves that
        window a few microseconds wide, however late a loaded machine runs this loop."""
        if self.transport is None or self.transport.is_closing():
            return self.close()
        raw = getattr(self.transport, "_sock", None) if self.transport.get_extra_info("sslcontext") is None else None
        if raw is not None:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            try:
                for _ in range(64):
                    data = raw.recv(65536)
                    if not data:
                        break
                    self.data_received(data)
            except (BlockingIOError, InterruptedError, OSError):
                pass
        for task in self.tasks:
            task.cancel()
        if self.transport is not None:
            self.transport.abort()
        if raw is not None:
            # abort() unregistered the socket from the selector; asyncio's own close later is a no-op.
            raw.close()

    def connection_lost(self, exc):
        for task in self.tasks:
            task.cancel()
        if not self.closed.done():
            self.closed.set_result(None)


async def run_server(args):
    log = Log(args.log)
    streams = {}
    connections = 0

    active = {}

    def hello(connection, message):
        name = message["stream"]
        if name not in streams:
            streams[name] = (Producer(name, args, log), Consumer(name, "up", log))
        # One live session per stream: an older one (its client gave up on it) stops producing now, or
        # what it still produced would go into a dead connection after the resume and never be resent.
        if name in active:
            active[name].abandon()
        active[name] = connection
        connection.producer, connection.consumer = streams[name]
        connection.on_hello = None
        log.write(event="connected", stream=name, conn=connection.conn)
        connection.send({"type": "WELCOME", "stream": name, "ack": connection.consumer.processed})
        connection.start(connection.producer.resume(message["ack"]))

    def factory():
        nonlocal connections
        connections += 1
        return Connection(args, log, connections, is_client=False, on_hello=hello)

    host, port = args.listen.rsplit(":", 1)
    server = await asyncio.get_running_loop().create_server(factory, host, int(port), ssl=server_tls(args))
    async with server:
        await stop_event().wait()


async def run_client(args):
    log = Log(args.log)
    producer, consumer = Producer(args.stream, args, log), Consumer(args.stream, "down", log)
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
                lambda: Connection(args, log, conn, True, welcome, producer, consumer), host, int(port), ssl=client_tls(args), server_hostname=args.server_name if args.tls_ca else None)
        except OSError:
            await asyncio.sleep(0.2)
            continue
        log.write(event="connected", stream=args.stream, conn=conn)
        connection.send({"type": "HELLO", "stream": args.stream, "ack": consumer.processed})
        connection.tasks.append(asyncio.ensure_future(connection.watch()))
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait([connection.closed, stopper], return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        connection.close()
        if args.quit_after_close and not stop.is_set():
            # aiohttp 3.10.0's bug as a client sees it: a connection that ended looks like a normal close, and the
            # client stops for good.
            log.write(event="quit", stream=args.stream, conn=conn)
            return
        await asyncio.sleep(0.2)


_stop = None


def stop_event():
    global _stop
    if _stop is None:
        _stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(number, _stop.set)
    return _stop


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=["server", "client"])
    parser.add_argument("--listen")
    parser.add_argument("--connect")
    parser.add_argument("--stream", default="c1")
    parser.add_argument("--log", required=True)
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--heartbeat", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=2.5)
    parser.add_argument("--send-for", type=float, default=1e9)
    parser.add_argument("--drop-on-resume", type=int, default=0)
    parser.add_argument("--quit-after-close", action="store_true", help="the client stops when its first connection ends")
    add_arguments(parser)
    args = parser.parse_args()
    prepare(args)
    asyncio.run(run_server(args) if args.role == "server" else run_client(args))


if __name__ == "__main__":
    sys.exit(main())
