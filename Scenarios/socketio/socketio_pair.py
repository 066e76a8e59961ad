#!/usr/bin/env python3
"""A third-party Socket.IO pair for chaos's Socket.IO audit: a python-socketio server on aiohttp and a python-socketio
AsyncClient that resumes through its CONNECT auth (python-socketio 5.x has no connection-state recovery: the app
resumes, as its users do).

server: each stream (the client's auth `stream`) is a timeline of `tick` events {"type": "TICK", "seq": N}, one every
--interval seconds for --send-for seconds from the connect of the --clients-th stream (1: the first); a connection gets the
events after its auth `offset` (the last seq the client saw), then the live ones. --skip-on-resume K: a resumed connection skips K events (a buggy server).
client: connects (--transports polling, websocket, or both: polling then the upgrade), logs every event it gets as
{"stream", "dir": "down", "seq", "conn"} (one line each, flushed), and reconnects on its own with offset = the last seq it
saw; --stale-resume K resumes from K events earlier (a buggy client that gets events again).
"""
import argparse
import asyncio
import json
import logging
import signal
import sys
import time

import socketio
from aiohttp import web
from engineio.payload import Payload

# A long-polling answer carries every packet queued since the last poll. python-engineio rejects one of more than 16
# packets ("Unexpected packet from server, aborting") and drops the session, so a loaded machine, or the backlog after a
# cut, made the clients reconnect for every event or two. An app that streams 20 events a second raises the limit, as
# python-socketio's documentation says.
Payload.max_decode_packets = 1000


def serve(args):
    # The timeline starts once --clients streams have connected, not with this process: on a loaded machine the clients
    # can connect seconds after the server started, and a run's faults count from its pair being ready, every client
    # connected (fresh-clone runs: s62q1's clients connected 10 s after the server's start; in s80q7 one client
    # connected 6 s after the other, and from the first one's connect all 180 events were out before the first fault,
    # so the buggy server's resumes skipped events that never came).
    start = None
    connected_streams = set()
    total = int(args.send_for / args.interval)
    sio = socketio.AsyncServer(async_mode="aiohttp", ping_interval=1, ping_timeout=2)
    app = web.Application()
    sio.attach(app)
    tasks = {}

    def produced():
        return 0 if start is None else min(total, int((time.monotonic() - start) / args.interval))

    async def feed(sid, stream, after):
        seq = after + 1
        try:
            while True:
                while seq <= produced():
                    await sio.emit("tick", {"type": "TICK", "stream": stream, "seq": seq}, to=sid)
                    seq += 1
                await asyncio.sleep(args.interval)
        except asyncio.CancelledError:
            pass

    @sio.event
    async def connect(sid, environ, auth):
        nonlocal start
        auth = auth or {}
        stream = auth.get("stream", "default")
        connected_streams.add(stream)
        if start is None and len(connected_streams) >= args.clients:
            start = time.monotonic()
        offset = int(auth.get("offset", 0))
        after = offset + args.skip_on_resume if offset > 0 else 0
        # What the tests read to know the resume (and its bug) happened.
        print(json.dumps({"connect": stream, "offset": offset, "from": after + 1}), flush=True)
        tasks[sid] = asyncio.ensure_future(feed(sid, stream, after))

    @sio.event
    async def disconnect(sid, *reason):
        task = tasks.pop(sid, None)
        if task:
            task.cancel()

    host, port = args.listen.rsplit(":", 1)
    web.run_app(app, host=host, port=int(port), print=None, handle_signals=True)


async def consume(args):
    log = open(args.log, "a", buffering=1)
    last = 0
    connection = 0
    transports = ["polling", "websocket"] if args.transports == "both" else [args.transports]
    # The libraries' own account of each request that failed, each loop that ended and each reconnect, on stderr
    # (client-N.err in a run folder): a client that kept polling a session a fault had ended shows there why.
    # Not the lines each packet and each poll write (a soak's log would grow by megabytes an hour).
    chatter = ("Sending packet", "Received packet", "Sending polling GET", "Received event", "Emitting event",
               "Sending polling POST")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    handler.addFilter(lambda record: not str(record.msg).startswith(chatter))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    client = socketio.AsyncClient(reconnection=True, reconnection_delay=0.2, reconnection_delay_max=1,
                                  logger=logging.getLogger("socketio.client"), engineio_logger=logging.getLogger("engineio.client"))

    @client.event
    async def connect():
        nonlocal connection
        connection += 1

    @client.on("tick")
    async def tick(data):
        nonlocal last
        log.write(json.dumps({"stream": args.stream, "dir": "down", "seq": data["seq"], "conn": connection}) + "\n")
        last = max(last, data["seq"])

    def auth():
        return {"stream": args.stream, "offset": max(0, last - args.stale_resume) if last else 0}

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stopping.set)
    url = f"http://{args.connect}?stream={args.stream}"
    while not stopping.is_set():
        try:
            await client.connect(url, transports=transports, auth=auth, wait_timeout=5)
            break
        except socketio.exceptions.ConnectionError:
            await asyncio.sleep(0.2)
    await stopping.wait()
    await client.disconnect()
    log.close()


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    server = sub.add_parser("server")
    server.add_argument("--listen", required=True)
    server.add_argument("--interval", type=float, default=0.05)
    server.add_argument("--send-for", type=float, default=8)
    server.add_argument("--clients", type=int, default=1, help="the streams whose connects start the timeline")
    server.add_argument("--skip-on-resume", type=int, default=0)
    server.add_argument("--stale-resume", type=int, default=0, help="a client's bug: ignored here")
    client = sub.add_parser("client")
    client.add_argument("--connect", required=True)
    client.add_argument("--stream", required=True)
    client.add_argument("--log", required=True)
    client.add_argument("--transports", choices=["polling", "websocket", "both"], default="both")
    client.add_argument("--stale-resume", type=int, default=0)
    client.add_argument("--skip-on-resume", type=int, default=0, help="a server's bug: ignored here")
    args = parser.parse_args()
    if args.mode == "server":
        serve(args)
    else:
        asyncio.run(consume(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
