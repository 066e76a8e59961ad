#!/usr/bin/env python3
"""A WebSocket client written as an app writes it with the Python `websockets` library's asyncio API (nothing of
chaos's own code): `async for ws in connect(...)`, which reconnects, and the library's own keepalive (a ping every
--ping-interval seconds, the connection failed when its pong is --ping-timeout late, --close-timeout for the
closing handshake). It uploads numbered messages to resumable_ws_pair.py's server with that pair's resume protocol:
HELLO{ack} on each connection, the server's WELCOME{ack} (the highest seq it processed), a resend of what it had
not, then MSG{seq} with --size bytes of hex payload at --rate a second; the server answers ACK{ack}. Deflate off: the
bytes on the wire are the bytes written.

--websockets DIR imports the library from DIR (a `pip install --target` of one release). websockets 14.1 has the
bug of websockets #1527, fixed in 14.2: when a keepalive ping times out while unsent data is queued, 14.1 closes
the transport gracefully, which waits to flush that data into a path that takes nothing, so the connection stays
CLOSING (and the app blocked in send()) until the path comes back; 14.2 aborts the transport and reconnects.

--write-limit raises the library's high-water mark (32 KiB by default): an app that lets its writes queue rather than
wait. (With a full buffer, send() and the keepalive's own ping wait for the buffer to drain, which a dead path never
lets them do, in every release: the keepalive never fires. The bug needs data queued below the mark.)

Once, --quiet-at seconds after the first connection, the app sends nothing for --quiet-for seconds (an app in the
background: a carrier NAT forgets the idle connection), then uploads again until --send-for. The log (NDJSON) has
an event per connection and per close, and the library's version, and one when it goes quiet with the last seq it
had sent:

  {"t": 9.1, "event": "closed", "stream": "c1", "conn": 1, "error": "ConnectionClosedError(...)"}
  {"t": 1.5, "event": "quiet", "stream": "c1", "last_seq": 71}

With WS_DEBUG set in its environment it also logs, every 0.5 s, what the library has buffered, the protocol's state and
the socket's send buffer size.
"""
import argparse
import asyncio
import json
import os
import random
import sys
import time

# The log and the stop signal are the NDJSON pair's own (this file's folder is on sys.path).
from resumable_pair import Log, stop_event


class Upload:
    """The messages of the stream: numbered, kept until the server says it processed them."""

    def __init__(self, args, log):
        self.args = args
        self.log = log
        self.next_seq = 1
        self.unacked = {}  # seq -> text, in seq order
        self.first = None
        self.went_quiet = False

    def acked(self, ack):
        for seq in [seq for seq in self.unacked if seq <= ack]:
            del self.unacked[seq]

    def due(self):
        """Whether a new message is due now: within --send-for of the first connection, outside the quiet time."""
        now = time.monotonic()
        if self.first is None:
            self.first = now
        elapsed = now - self.first
        quiet = self.args.quiet_at <= elapsed < self.args.quiet_at + self.args.quiet_for
        if quiet and not self.went_quiet:
            self.went_quiet = True
            self.log.write(event="quiet", stream=self.args.stream, last_seq=self.next_seq - 1)
        return elapsed < self.args.send_for and not quiet

    def make(self):
        seq = self.next_seq
        self.next_seq += 1
        payload = random.Random(seq).randbytes(self.args.size // 2).hex()
        text = json.dumps({"type": "MSG", "seq": seq, "payload": payload})
        self.unacked[seq] = text
        return text


async def read_acks(ws, upload):
    async for message in ws:
        reply = json.loads(message)
        if reply.get("type") == "ACK":
            upload.acked(reply["ack"])


async def watch(ws, log, conn):
    while True:
        sock = ws.transport.get_extra_info("socket")
        log.write(event="debug", conn=conn, buffered=ws.transport.get_write_buffer_size(), state=str(ws.protocol.state),
                  paused=ws.paused, sndbuf=sock.getsockopt(1, 7) if sock else None)
        await asyncio.sleep(0.5)


async def run(args, connect, ConnectionClosed, version):
    log = Log(args.log)
    stop = stop_event()
    upload = Upload(args, log)
    conn = 0
    options = dict(
        additional_headers={"X-Stream": args.stream},
        compression=None,
        ping_interval=args.ping_interval,
        ping_timeout=args.ping_timeout,
        close_timeout=args.close_timeout,
        open_timeout=5,
        max_size=None,
        write_limit=args.write_limit,
    )
    async for ws in connect(f"ws://{args.connect}/feed", **options):
        conn += 1
        log.write(event="connected", stream=args.stream, conn=conn, websockets=version)
        reader = None
        monitor = asyncio.ensure_future(watch(ws, log, conn)) if os.environ.get("WS_DEBUG") else None
        try:
            await ws.send(json.dumps({"type": "HELLO", "ack": 0}))
            welcome = json.loads(await ws.recv())
            upload.acked(welcome["ack"])
            reader = asyncio.ensure_future(read_acks(ws, upload))
            for text in list(upload.unacked.values()):
                await ws.send(text)
            while not stop.is_set():
                if upload.due():
                    await ws.send(upload.make())
                await asyncio.sleep(1 / args.rate)
            await ws.close()
            return
        except ConnectionClosed as exc:
            log.write(event="closed", stream=args.stream, conn=conn, error=repr(exc))
        finally:
            if reader is not None:
                reader.cancel()
            if monitor is not None:
                monitor.cancel()
        if stop.is_set():
            return


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connect", required=True)
    parser.add_argument("--stream", default="c1")
    parser.add_argument("--log", required=True)
    parser.add_argument("--websockets", help="import the websockets library from this folder")
    parser.add_argument("--rate", type=float, default=100)
    parser.add_argument("--size", type=int, default=6000)
    parser.add_argument("--ping-interval", type=float, default=6)
    parser.add_argument("--ping-timeout", type=float, default=2)
    parser.add_argument("--close-timeout", type=float, default=1)
    parser.add_argument("--write-limit", type=int, default=2**15, help="the library's write buffer high-water mark")
    parser.add_argument("--quiet-at", type=float, default=1e9)
    parser.add_argument("--quiet-for", type=float, default=0)
    parser.add_argument("--send-for", type=float, default=1e9)
    args = parser.parse_args()
    if args.websockets:
        sys.path.insert(0, args.websockets)
    import websockets
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    asyncio.run(run(args, connect, ConnectionClosed, websockets.__version__))


if __name__ == "__main__":
    sys.exit(main())
