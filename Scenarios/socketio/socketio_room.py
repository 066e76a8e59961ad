#!/usr/bin/env python3
"""A Socket.IO chat room for chaos's fan-out audit (`protocol.fanout` over `framing: socketio`): a python-socketio
server on aiohttp that broadcasts each member's messages to the rest of the room (python-socketio's rooms:
`emit(..., room=..., skip_sid=...)`), and python-socketio AsyncClients that send numbered messages and resume after
any cut, as a chat app that must not lose a message would.

  socketio_room.py server --listen HOST:PORT --log FILE [--drop-on-resume N]
  socketio_room.py client --connect HOST:PORT --user NAME --log FILE [--rate R] [--send-for S] [--transports T]

Wire (Socket.IO events; the member's name in the query, `?user=NAME`):
- member -> server: once connected, `hello` {"seen": {SENDER: N, ...}} (the highest N it has from each sender), then
  `chat` {"from": NAME, "n": N} with N = 1, 2, ... (after a cut, resent from the server's first ack on).
- server -> member: to the hello, `ack` {"from": NAME, "ack": N} (the highest of the member's own N it has), every
  other sender's messages the member has not seen (the server keeps the room's history), then live ones as the room's
  broadcast, each `chat` {"from": SENDER, "n": N}; and an `ack` after each of the member's own messages.

Logs (one JSON line each, flushed): the server logs each message it accepts, {"dir": "up", "stream": SENDER, "seq": N};
a member logs each message it is handed, {"dir": "down", "stream": SENDER, "receiver": NAME, "seq": N} (a copy of one
it already has is not handed on). --drop-on-resume N: the server's bug, on a returning member's connection it skips
the first N messages of each sender it would hand that member, replayed or broadcast (so a resume that owes nothing
still loses the next ones, and every resume makes a hole). Engine.IO pings every second, 2 s timeout. Runs until SIGTERM.
"""
import argparse
import asyncio
import json
import signal
from urllib.parse import parse_qs

import socketio
from aiohttp import web
from engineio.payload import Payload

# A long-polling answer carries every packet queued since the last poll. python-engineio rejects one of more than 16
# packets ("Unexpected packet from server, aborting") and drops the session, so a loaded machine, or the backlog after a
# cut, made the clients reconnect for every event or two. An app that streams 20 events a second raises the limit, as
# python-socketio's documentation says.
Payload.max_decode_packets = 1000

ROOM = "room"


def open_log(path):
    return open(path, "a", buffering=1)


def serve(args):
    log = open_log(args.log)
    history = {}  # sender -> [message, ...] in order
    names = {}  # sid -> member name
    in_room = set()  # sids that get the room's broadcasts
    skipping = {}  # sid of a returning member -> {sender: how many more of its messages are skipped} (the bug)
    sio = socketio.AsyncServer(async_mode="aiohttp", ping_interval=1, ping_timeout=2)
    app = web.Application()
    sio.attach(app)

    @sio.event
    async def connect(sid, environ, auth):
        names[sid] = parse_qs(environ.get("QUERY_STRING", "")).get("user", ["?"])[0]

    def skips(sid, sender):
        """Whether the bug skips this message of `sender` to `sid` (and counts it)."""
        left = skipping.get(sid)
        if left is None:
            return False
        count = left.get(sender, args.drop_on_resume)
        left[sender] = max(0, count - 1)
        return count > 0

    @sio.event
    async def hello(sid, message):
        name = names.get(sid)
        seen = (message or {}).get("seen", {})
        await sio.emit("ack", {"from": name, "ack": len(history.get(name, []))}, to=sid)
        # What the member missed, in order, then the room: a pass finds what was accepted during the last one's sends,
        # and the member joins the room once a pass finds nothing (no await between the check and the join, so no
        # broadcast goes by unseen and none overtakes the replay).
        upto = {sender: seen.get(sender, 0) for sender in history}
        if seen and args.drop_on_resume:
            skipping[sid] = {}
        while True:
            missed = [m for sender, messages in history.items() if sender != name for m in messages[upto.get(sender, 0):]]
            if not missed:
                await sio.enter_room(sid, ROOM)
                in_room.add(sid)
                break
            for message in missed:
                upto[message["from"]] = max(upto.get(message["from"], 0), message["n"])
                if not skips(sid, message["from"]):
                    await sio.emit("chat", message, to=sid)

    @sio.event
    async def chat(sid, message):
        name = names.get(sid)
        if not isinstance(message, dict) or message.get("from") != name:
            return
        kept = history.setdefault(name, [])
        if message.get("n") == len(kept) + 1:
            kept.append({"from": name, "n": message["n"]})
            log.write(json.dumps({"dir": "up", "stream": name, "seq": message["n"]}) + "\n")
            skipped = [other for other in list(in_room) if other != sid and skips(other, name)]
            await sio.emit("chat", kept[-1], room=ROOM, skip_sid=[sid] + skipped)
        await sio.emit("ack", {"from": name, "ack": len(kept)}, to=sid)

    @sio.event
    async def disconnect(sid, *reason):
        names.pop(sid, None)
        in_room.discard(sid)
        skipping.pop(sid, None)

    host, port = args.listen.rsplit(":", 1)
    web.run_app(app, host=host, port=int(port), print=None, handle_signals=True)


async def member(args):
    log = open_log(args.log)
    seen = {}  # sender -> highest n handed on
    sent = []  # own messages, n = index + 1
    acked = 0
    resend = False  # the first ack after a connect says where to resend from
    ready = asyncio.Event()  # connected and resent: new messages go out as they are made
    transports = ["polling", "websocket"] if args.transports == "both" else [args.transports]
    client = socketio.AsyncClient(reconnection=True, reconnection_delay=0.2, reconnection_delay_max=1)

    @client.event
    async def connect():
        nonlocal resend
        resend = True
        await client.emit("hello", {"seen": dict(seen)})

    @client.event
    async def disconnect(*reason):
        ready.clear()

    @client.on("ack")
    async def on_ack(message):
        nonlocal acked, resend
        acked = max(acked, message.get("ack", 0))
        if resend:
            # What the server does not have yet (a cut took it) goes again, in order, once per connection.
            resend = False
            index = acked
            # Until caught up with what is made meanwhile; then new ones go out as they are made.
            while index < len(sent):
                await client.emit("chat", sent[index])
                index += 1
            ready.set()

    @client.on("chat")
    async def on_chat(message):
        sender, n = message.get("from"), message.get("n", 0)
        if n <= seen.get(sender, 0):
            return
        seen[sender] = n
        log.write(json.dumps({"dir": "down", "stream": sender, "receiver": args.user, "seq": n}) + "\n")

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    url = f"http://{args.connect}?user={args.user}"
    while not stop.is_set():
        try:
            await client.connect(url, transports=transports, wait_timeout=5)
            break
        except socketio.exceptions.ConnectionError:
            await asyncio.sleep(0.2)
    began = loop.time()
    while not stop.is_set():
        if loop.time() - began < args.send_for:
            message = {"from": args.user, "n": len(sent) + 1}
            sent.append(message)
            if ready.is_set():
                try:
                    await client.emit("chat", message)
                except socketio.exceptions.BadNamespaceError:
                    pass
        try:
            await asyncio.wait_for(stop.wait(), 1 / args.rate)
        except asyncio.TimeoutError:
            pass
    await client.disconnect()
    log.close()


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    server = sub.add_parser("server")
    server.add_argument("--listen", required=True)
    server.add_argument("--log", required=True)
    server.add_argument("--drop-on-resume", type=int, default=0)
    client = sub.add_parser("client")
    client.add_argument("--connect", required=True)
    client.add_argument("--user", required=True)
    client.add_argument("--log", required=True)
    client.add_argument("--rate", type=float, default=10)
    client.add_argument("--send-for", type=float, default=9)
    client.add_argument("--transports", choices=["polling", "websocket", "both"], default="websocket")
    args = parser.parse_args()
    if args.mode == "server":
        serve(args)
    else:
        asyncio.run(member(args))


if __name__ == "__main__":
    main()
