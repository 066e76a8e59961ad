#!/usr/bin/env python3
"""A chat pair for chaos's fan-out audit (`protocol.fanout`), on PyPI `websockets` both ends: a server that fans each
member's messages out to every other member of one room, and members that send numbered messages and resume after
any cut, as a chat app that must not lose a message would.

  chat_pair.py server --listen HOST:PORT --log FILE [--drop-on-resume N]
  chat_pair.py client --connect HOST:PORT --user NAME --log FILE [--rate R] [--send-for S]

Wire (JSON text messages over ws://HOST:PORT/chat?user=NAME):
- member -> server: {"type": "hello", "seen": {SENDER: N, ...}} first (the highest N it has from each sender), then
  {"type": "chat", "from": NAME, "n": N, "text": ...} with N = 1, 2, ... (resent from the server's ack on after a cut).
- server -> member: {"type": "welcome", "from": NAME, "ack": N} (the highest of the member's own N it has), every other
  sender's messages it has not seen (the server keeps the room's history), then live ones as they come, each
  {"type": "chat", "from": SENDER, "n": N, "text": ...}; and {"type": "ack", "from": NAME, "ack": N} for its own.

Logs (one JSON line each, flushed): the server logs each message it accepts, {"dir": "up", "stream": SENDER, "seq": N};
a member logs each message it is handed, {"dir": "down", "stream": SENDER, "receiver": NAME, "seq": N} (a copy of
one it already has is not handed on). --drop-on-resume N: the server's bug, on a returning member's connection it
skips the first N messages of each sender it would hand that member, replayed or live (so a resume that owes nothing
still loses the next ones, and every resume makes a hole).
Keepalive: websockets' pings every second, 2 s timeout (a half-open connection is noticed). Runs until SIGTERM.
"""
import argparse
import asyncio
import json
import signal
import sys
from urllib.parse import parse_qs, urlparse

import websockets


def open_log(path):
    return open(path, "a", buffering=1)


async def serve(args):
    log = open_log(args.log)
    history = {}  # sender -> [message, ...] in order
    members = {}  # name -> hands a message to its live connection
    host, port = args.listen.rsplit(":", 1)

    async def member(connection):
        query = parse_qs(urlparse(connection.request.path).query)
        name = query.get("user", ["?"])[0]
        hello = json.loads(await connection.recv())
        seen = hello.get("seen", {})
        queue = asyncio.Queue()
        own = len(history.get(name, []))
        queue.put_nowait({"type": "welcome", "from": name, "ack": own})
        # The bug: how many more of each sender's messages this connection skips (a returning member's only).
        skips = {} if seen and args.drop_on_resume else None

        def hand(message):
            if skips is not None:
                left = skips.get(message["from"], args.drop_on_resume)
                if left > 0:
                    skips[message["from"]] = left - 1
                    return
            queue.put_nowait(message)

        # The replay and the registration happen in one step: nothing accepted in between is missed.
        for sender, messages in history.items():
            if sender == name:
                continue
            for message in messages[seen.get(sender, 0):]:
                hand(message)
        members[name] = hand

        async def writer():
            while True:
                await connection.send(json.dumps(await queue.get()))

        sending = asyncio.create_task(writer())
        try:
            async for text in connection:
                message = json.loads(text)
                if message.get("type") != "chat" or message.get("from") != name:
                    continue
                kept = history.setdefault(name, [])
                if message["n"] == len(kept) + 1:
                    kept.append(message)
                    log.write(json.dumps({"dir": "up", "stream": name, "seq": message["n"]}) + "\n")
                    for other, other_hand in members.items():
                        if other != name:
                            other_hand(message)
                queue.put_nowait({"type": "ack", "from": name, "ack": len(kept)})
        except websockets.ConnectionClosed:
            pass
        finally:
            sending.cancel()
            if members.get(name) is hand:
                del members[name]

    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    async with websockets.serve(member, host, int(port), ping_interval=1, ping_timeout=2):
        await stop.wait()


async def chat(args):
    log = open_log(args.log)
    seen = {}  # sender -> highest n handed on
    sent = []  # own messages, n = index + 1
    acked = 0
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    loop = asyncio.get_running_loop()
    began = loop.time()
    backoff = 0.2

    async def produce(connection):
        while not stop.is_set():
            if loop.time() - began < args.send_for:
                message = {"type": "chat", "from": args.user, "n": len(sent) + 1, "text": "hi"}
                sent.append(message)
                await connection.send(json.dumps(message))
            await asyncio.sleep(1 / args.rate)

    while not stop.is_set():
        try:
            async with websockets.connect(f"ws://{args.connect}/chat?user={args.user}", ping_interval=1, ping_timeout=2,
                                          open_timeout=3, close_timeout=1) as connection:
                backoff = 0.2
                await connection.send(json.dumps({"type": "hello", "seen": seen}))
                welcome = json.loads(await connection.recv())
                acked = max(acked, welcome.get("ack", 0))
                for message in sent[acked:]:
                    await connection.send(json.dumps(message))
                producing = asyncio.create_task(produce(connection))
                stopping = asyncio.create_task(stop.wait())
                try:
                    while True:
                        receiving = asyncio.create_task(connection.recv())
                        done, _ = await asyncio.wait({receiving, stopping}, return_when=asyncio.FIRST_COMPLETED)
                        if receiving not in done:
                            receiving.cancel()
                            return
                        message = json.loads(receiving.result())
                        if message.get("type") == "ack":
                            acked = max(acked, message["ack"])
                        elif message.get("type") == "chat":
                            sender, n = message["from"], message["n"]
                            if n <= seen.get(sender, 0):
                                continue
                            seen[sender] = n
                            log.write(json.dumps({"dir": "down", "stream": sender, "receiver": args.user, "seq": n}) + "\n")
                finally:
                    producing.cancel()
                    stopping.cancel()
        except (OSError, asyncio.TimeoutError, websockets.WebSocketException):
            pass
        if not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), backoff)
            except asyncio.TimeoutError:
                pass
            backoff = min(backoff * 2, 1.0)


def main():
    parser = argparse.ArgumentParser()
    modes = parser.add_subparsers(dest="mode", required=True)
    server = modes.add_parser("server")
    server.add_argument("--listen", required=True)
    server.add_argument("--log", required=True)
    server.add_argument("--drop-on-resume", type=int, default=0)
    client = modes.add_parser("client")
    client.add_argument("--connect", required=True)
    client.add_argument("--user", required=True)
    client.add_argument("--log", required=True)
    client.add_argument("--rate", type=float, default=10)
    client.add_argument("--send-for", type=float, default=8)
    args = parser.parse_args()
    asyncio.run(serve(args) if args.mode == "server" else chat(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
