#!/usr/bin/env python3
"""A third-party Server-Sent Events pair for chaos's SSE audit: an aiohttp + aiohttp-sse server and an aiohttp
client that resumes with Last-Event-ID after every disconnect.

server: each stream (the request's ?s=NAME) is a timeline of events seq 1, 2, ... (one every --interval seconds
for --send-for seconds from the first request); a connection gets the events after its Last-Event-ID (all from 1 without one), then the
live ones, each as `id: N`, `event: tick`, `data: {"type": "TICK", "seq": N}`, after a `hello` event (no id, `retry:`). --skip-on-resume K: a resumed connection skips K
events (a buggy server).
client: reads the stream, logs every event it gets as {"stream", "dir": "down", "seq", "conn"} (one line each,
flushed), and reconnects on any end with Last-Event-ID = the last id read; --stale-resume K resumes from K events
earlier (a buggy client that gets events again).
"""
import argparse
import asyncio
import json
import sys
import time

import aiohttp
from aiohttp import web
from aiohttp_sse import sse_response


def serve(args):
    # The timeline starts with the first client's request, not with this process: on a loaded machine the clients
    # can connect seconds after the server started, and a run's faults count from its pair being ready (a fresh-clone
    # run, s61dq1: all 160 events were out before the first fault, so the buggy server never resumed anyone).
    start = None
    total = int(args.send_for / args.interval)

    def produced():
        return min(total, int((time.monotonic() - start) / args.interval))

    async def events(request):
        nonlocal start
        if start is None:
            start = time.monotonic()
        stream = request.query.get("s", "default")
        last = request.headers.get("Last-Event-ID")
        seq = int(last) + 1 + args.skip_on_resume if last else 1
        async with sse_response(request, ping_interval=1000) as response:
            try:
                await response.send(json.dumps({"type": "HELLO", "stream": stream}), event="hello", retry=300)
                while True:
                    while seq <= produced():
                        await response.send(json.dumps({"type": "TICK", "seq": seq}), id=str(seq), event="tick")
                        seq += 1
                    await asyncio.sleep(args.interval)
            except ConnectionResetError:
                pass  # the client (or the proxy in between) went away: it resumes on a new connection
        return response

    app = web.Application()
    app.router.add_get("/events", events)
    host, port = args.listen.rsplit(":", 1)
    web.run_app(app, host=host, port=int(port), print=None, handle_signals=True)


async def consume(args):
    log = open(args.log, "a", buffering=1)
    last, connection = None, 0
    url = f"http://{args.connect}/events?s={args.stream}"
    while True:
        connection += 1
        headers = {} if last is None else {"Last-Event-ID": str(max(0, last - args.stale_resume))}
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
                async with session.get(url, headers=headers) as response:
                    data, event_id = [], None
                    async for raw in response.content:
                        line = raw.decode().rstrip("\r\n")
                        if line.startswith(":"):
                            continue
                        if line == "":
                            if data and event_id is not None:
                                seq = json.loads("\n".join(data)).get("seq")
                                if seq is not None:
                                    log.write(json.dumps({"stream": args.stream, "dir": "down", "seq": seq,
                                                          "conn": connection}) + "\n")
                                    last = int(event_id)
                            data, event_id = [], None
                            continue
                        field, _, value = line.partition(":")
                        value = value[1:] if value.startswith(" ") else value
                        if field == "data":
                            data.append(value)
                        elif field == "id":
                            event_id = value
        except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError):
            pass
        await asyncio.sleep(0.2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["server", "client"])
    parser.add_argument("--listen")
    parser.add_argument("--connect")
    parser.add_argument("--stream", default="c1")
    parser.add_argument("--log", default="/dev/null")
    parser.add_argument("--send-for", type=float, default=8)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--skip-on-resume", type=int, default=0)
    parser.add_argument("--stale-resume", type=int, default=0)
    args = parser.parse_args()
    if args.role == "server":
        serve(args)
    else:
        try:
            asyncio.run(consume(args))
        except KeyboardInterrupt:
            sys.exit(0)


if __name__ == "__main__":
    main()
