#!/usr/bin/env python3
"""An independent resumable gRPC pair (grpcio; nothing of chaos's own code), for the gRPC audit's ground truth.

One bidirectional-streaming RPC, /follow.v1.Follow/Race (Tests/Fixtures/protos/follow.proto; the messages are
built at run time from follow.protoset, no generated code). The client opens a call with metadata
x-session: STREAM and sends RaceRequest{kind: HELLO, acked_sequence_id: the highest server seq it processed};
the server answers RaceUpdate{kind: WELCOME, acked_sequence_id: the highest client seq it processed}. Each side
then retransmits what the other has not processed and goes on streaming {kind: MSG, sequence_id: N}; consumers
answer {kind: ACK, acked_sequence_id} and drop what they already processed. Both log every MSG they *read*:

  {"t": 1.23, "stream": "c1", "dir": "down", "seq": 17, "conn": 2, "dup": false}

HTTP/2 keepalive (both sides PING every --keepalive seconds, --keepalive-timeout to answer) notices a half-open
partition on both sides; the client then opens a new call (grpcio reconnects the channel by itself).

--drop-on-resume N makes the producer buggy: on every resume it throws away the first N unprocessed messages
instead of retransmitting them. --send-for S stops producing S seconds after the stream's first connection.

--call-for S ends every call cleanly after S seconds (the client stops producing and acknowledging, half-closes,
and reads what the server still sends up to its OK status), then opens the next one, which resumes by HELLO as
after a cut. A draining server's GOAWAY then costs nothing: grpcio puts the next call on a new connection while
the old call ends by itself within the grace time. Every call's end is logged:

  {"t": 4.56, "event": "call-ended", "stream": "c1", "conn": 3, "code": "OK"}
"""
import argparse
import asyncio
import os
import sys
import time
from functools import partial

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from pair_tls import add_arguments, split_pem
from resumable_pair import Consumer, Log, producing, stop_event
PROTOSET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "protos", "follow.protoset")
METHOD = "/follow.v1.Follow/Race"


def load_messages():
    files = descriptor_pb2.FileDescriptorSet()
    with open(PROTOSET, "rb") as handle:
        files.ParseFromString(handle.read())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    get = message_factory.GetMessageClass
    return get(pool.FindMessageTypeByName("follow.v1.RaceRequest")), get(pool.FindMessageTypeByName("follow.v1.RaceUpdate"))


Request, Update = load_messages()



class Producer:
    """Outgoing messages of one stream: numbered, kept until the other side says it processed them."""

    def __init__(self, args, log, stream):
        self.args = args
        self.log = log
        self.stream = stream
        self.next_seq = 1
        self.unacked = []

    def acked(self, ack):
        self.unacked = [seq for seq in self.unacked if seq > ack]

    def resume(self, ack):
        self.acked(ack)
        if self.args.drop_on_resume and self.unacked:
            for seq in self.unacked[: self.args.drop_on_resume]:
                self.log.write(event="dropped", stream=self.stream, seq=seq)
            self.unacked = self.unacked[self.args.drop_on_resume:]
        return list(self.unacked)

    def make(self):
        seq = self.next_seq
        self.next_seq += 1
        self.unacked.append(seq)
        return seq



class Sender:
    """Every write of a call goes through one task (grpcio allows one write at a time), from a bounded queue."""

    def __init__(self, write):
        self.queue = asyncio.Queue(maxsize=1000)
        self.task = asyncio.ensure_future(self.run(write))

    async def run(self, write):
        while True:
            message = await self.queue.get()
            if message is None:
                return
            await write(message)

    async def send(self, message):
        await self.queue.put(message)

    async def finish(self):
        """Writes what is queued, then returns (what is sent after this is never written)."""
        await self.queue.put(None)
        await self.task

    def close(self):
        self.task.cancel()


async def pump(args, send, producer, make, stop):
    """Streams MSGs at --rate while the call lives."""
    interval = 1.0 / args.rate
    while not stop.is_set():
        if producing(args.send_for, producer.stream):
            seq = producer.make()
            await send(make(kind="MSG", sequence_id=seq))
        await asyncio.sleep(interval)


async def run_server(args):
    log = Log(args.log)
    streams = {}
    active = {}
    calls = 0

    async def race(request_iterator, context):
        nonlocal calls
        calls += 1
        conn = calls
        session = dict(context.invocation_metadata()).get("x-session", "?")
        first = await context.read()
        if first is grpc.aio.EOF or first.kind != "HELLO":
            return
        producer, consumer = streams.setdefault(session, (Producer(args, log, session), Consumer(session, "up", log)))
        # One live call per session: an older one (its client gave up on it) stops now.
        if session in active:
            active[session].set()
        stop = asyncio.Event()
        active[session] = stop
        log.write(event="connected", stream=session, conn=conn, peer=context.peer())
        sender = Sender(context.write)
        await sender.send(Update(kind="WELCOME", session_id=session, acked_sequence_id=consumer.processed))
        for seq in producer.resume(first.acked_sequence_id):
            await sender.send(Update(kind="MSG", session_id=session, sequence_id=seq))
        writer = asyncio.ensure_future(pump(args, sender.send, producer,
                                            lambda **f: Update(session_id=session, **f), stop))
        try:
            while not stop.is_set():
                reading = asyncio.ensure_future(context.read())
                stopping = asyncio.ensure_future(stop.wait())
                done, _ = await asyncio.wait([reading, stopping], return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
                if reading not in done:
                    reading.cancel()
                    break
                message = reading.result()
                if message is grpc.aio.EOF:
                    break
                if message.kind == "MSG":
                    consumer.read(message.sequence_id, conn)
                    await sender.send(Update(kind="ACK", session_id=session, acked_sequence_id=consumer.processed))
                elif message.kind == "ACK":
                    producer.acked(message.acked_sequence_id)
        finally:
            stop.set()
            writer.cancel()
            sender.close()

    # The server pings too, so a half-open partition ends both sides' connections: what the partition held toward
    # the server is then refused by its kernel instead of landing, acknowledged but unread, on a call the client
    # already cancelled.
    server = grpc.aio.server(options=[
        ("grpc.keepalive_time_ms", int(args.keepalive * 1000)),
        ("grpc.keepalive_timeout_ms", int(args.keepalive_timeout * 1000)),
        ("grpc.http2.ping_timeout_ms", int(args.keepalive_timeout * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 100),
        ("grpc.http2.max_ping_strikes", 0),
    ])
    handler = grpc.method_handlers_generic_handler("follow.v1.Follow", {
        "Race": grpc.stream_stream_rpc_method_handler(
            race, request_deserializer=Request.FromString, response_serializer=Update.SerializeToString),
    })
    server.add_generic_rpc_handlers((handler,))
    if args.tls_cert:
        key, chain = split_pem(args.tls_cert)  # grpc wants the key and the chain apart
        server.add_secure_port(args.listen, grpc.ssl_server_credentials([(key, chain)]))
    else:
        server.add_insecure_port(args.listen)
    await server.start()
    await stop_event().wait()
    await server.stop(0.5)


async def run_client(args):
    log = Log(args.log)
    producer, consumer = Producer(args, log, args.stream), Consumer(args.stream, "down", log)
    stop_all = stop_event()
    keepalive_ms = int(args.keepalive * 1000)
    credentials = grpc.ssl_channel_credentials(root_certificates=open(args.tls_ca, "rb").read()) if args.tls_ca else None
    channel = (partial(grpc.aio.secure_channel, credentials=credentials) if args.tls_ca else grpc.aio.insecure_channel)(args.connect, options=[
        ("grpc.keepalive_time_ms", keepalive_ms),
        ("grpc.keepalive_timeout_ms", int(args.keepalive_timeout * 1000)),
        # grpc-core's chttp2 transport times a keepalive PING out with the ping timeout (keepalive_timeout_ms alone
        # never fires: grpc/grpc#39239), so a half-open partition goes unnoticed without this.
        ("grpc.http2.ping_timeout_ms", int(args.keepalive_timeout * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.initial_reconnect_backoff_ms", 200),
        ("grpc.max_reconnect_backoff_ms", 1000),
        # With TLS: the name asked for (SNI) and checked in the certificate; unused on a cleartext channel.
        ("grpc.ssl_target_name_override", args.server_name),
    ])
    race = channel.stream_stream(METHOD, request_serializer=Request.SerializeToString,
                                 response_deserializer=Update.FromString)
    conn = 0
    while not stop_all.is_set():
        conn += 1
        call = race(metadata=(("x-session", args.stream),), wait_for_ready=True)
        stop = asyncio.Event()
        writer = None
        sender = Sender(call.write)
        try:
            await sender.send(Request(kind="HELLO", session_id=args.stream, acked_sequence_id=consumer.processed))
            welcome = await call.read()
            if welcome is grpc.aio.EOF or welcome.kind != "WELCOME":
                raise ConnectionError("no WELCOME")
            log.write(event="connected", stream=args.stream, conn=conn)
            for seq in producer.resume(welcome.acked_sequence_id):
                await sender.send(Request(kind="MSG", session_id=args.stream, sequence_id=seq))
            writer = asyncio.ensure_future(pump(args, sender.send, producer,
                                                lambda **f: Request(session_id=args.stream, **f), stop))
            # With --call-for, the call ends cleanly at this time: no more MSGs or ACKs, done_writing, then
            # everything the server still sends is read up to its OK (what was read then is acked by the next HELLO).
            ending_at = time.monotonic() + args.call_for if args.call_for else None
            reading = None
            while not stop_all.is_set():
                if reading is None:
                    reading = asyncio.ensure_future(call.read())
                stopping = asyncio.ensure_future(stop_all.wait())
                timeout = None if ending_at is None else max(0.0, ending_at - time.monotonic())
                done, _ = await asyncio.wait([reading, stopping], timeout=timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
                if stop_all.is_set() and reading not in done:
                    reading.cancel()
                    break
                if reading not in done:
                    ending_at = None
                    stop.set()
                    writer.cancel()
                    await sender.finish()
                    await call.done_writing()
                    continue
                message = reading.result()
                reading = None
                if message is grpc.aio.EOF:
                    log.write(event="call-ended", stream=args.stream, conn=conn, code=(await call.code()).name)
                    break
                if message.kind == "MSG":
                    consumer.read(message.sequence_id, conn)
                    if not stop.is_set():
                        await sender.send(Request(kind="ACK", session_id=args.stream, acked_sequence_id=consumer.processed))
                elif message.kind == "ACK":
                    producer.acked(message.acked_sequence_id)
        except (grpc.aio.AioRpcError, ConnectionError, asyncio.InvalidStateError) as error:
            code = error.code().name if isinstance(error, grpc.aio.AioRpcError) else str(error)
            log.write(event="call-ended", stream=args.stream, conn=conn, code=code)
        finally:
            stop.set()
            if writer is not None:
                writer.cancel()
            sender.close()
            call.cancel()
        if not stop_all.is_set() and not args.call_for:
            await asyncio.sleep(0.2)
    await channel.close()



def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=["server", "client"])
    parser.add_argument("--listen")
    parser.add_argument("--connect")
    parser.add_argument("--stream", default="c1")
    parser.add_argument("--log", required=True)
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--keepalive", type=float, default=1.0)
    parser.add_argument("--keepalive-timeout", type=float, default=1.5)
    parser.add_argument("--send-for", type=float, default=1e9)
    parser.add_argument("--drop-on-resume", type=int, default=0)
    parser.add_argument("--call-for", type=float, default=0)
    add_arguments(parser)
    args = parser.parse_args()
    if args.keylog or args.tls_version or args.tls_cipher:
        # grpcio's TLS is BoringSSL, with no key log and no cipher choice: tls_terminator.py does TLS for it.
        parser.error("--keylog, --tls-version and --tls-cipher: put tls_terminator.py in front of a cleartext server")
    asyncio.run(run_server(args) if args.role == "server" else run_client(args))


if __name__ == "__main__":
    sys.exit(main())
