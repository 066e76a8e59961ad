#!/usr/bin/env python3
"""Writes the offline audit benchmark's capture (Benchmarks/offline-audit.sh): what `tcpdump` on an Ethernet link
would hold of a pair carrying NDJSON lines, 16 connections opened with a handshake, each end sending lines of
40-400 bytes (stream "c<N>" from the client, "s<N>" from the server, seq 1.. each) in TCP segments of at most SEGMENT
bytes (1448: an Ethernet MTU's), each side's ACK for every second segment it receives, and FINs at the end, paced
as a 1 Gbit/s link would.

  offline_capture.py FILE MEGABYTES SEGMENT

Prints the number of messages written each way, as `messages N` (the audit must count every one ok)."""
import random
import struct
import sys

path, megabytes, segment = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(24)
CONNECTIONS = 16
CLIENT, SERVER = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
ETHERNET = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
out = open(path, "wb", buffering=1 << 22)
out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
clock = [1_700_000_000_000_000]


def packet(source, destination, sport, dport, seq, ack, flags, payload=b""):
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0)
    length = 20 + len(tcp) + len(payload)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, length, 0, 0x4000, 64, 6, 0, source, destination)
    frame = ETHERNET + ip + tcp + payload
    clock[0] += max(1, len(frame) * 8 // 1000)  # paced at 1 Gbit/s (microseconds)
    seconds, micros = divmod(clock[0], 1_000_000)
    out.write(struct.pack("<IIII", seconds, micros, len(frame), len(frame)))
    out.write(frame)


SYN, ACK, PSH, FIN = 0x02, 0x10, 0x08, 0x01


class End:
    def __init__(self, address, port, name):
        self.address, self.port, self.name = address, port, name
        self.seq = rng.randrange(1 << 32)
        self.pending = bytearray()
        self.sent = 0
        self.unacked_segments = 0


def line(stream, seq):
    head = b'{"type":"MSG","stream":"%s","seq":%d,"payload":"' % (stream.encode(), seq)
    return head + b"x" * rng.randint(20, 380) + b'"}\n'


pairs = []
for index in range(CONNECTIONS):
    client, server = End(CLIENT, 40000 + index, "c%d" % index), End(SERVER, 7000, "s%d" % index)
    packet(CLIENT, SERVER, client.port, server.port, client.seq, 0, SYN)
    packet(SERVER, CLIENT, server.port, client.port, server.seq, client.seq + 1, SYN | ACK)
    client.seq += 1
    server.seq += 1
    packet(CLIENT, SERVER, client.port, server.port, client.seq, server.seq, ACK)
    pairs.append((client, server))


def send(sender, receiver, payload):
    packet(sender.address, receiver.address, sender.port, receiver.port, sender.seq, receiver.seq, ACK | PSH, payload)
    sender.seq += len(payload)
    receiver.unacked_segments += 1
    if receiver.unacked_segments == 2:
        receiver.unacked_segments = 0
        packet(receiver.address, sender.address, receiver.port, sender.port, receiver.seq, sender.seq, ACK)


target, written, messages = megabytes << 20, 0, 0
while written < target:
    client, server = pairs[rng.randrange(CONNECTIONS)]
    sender, receiver = (client, server) if rng.random() < 0.5 else (server, client)
    while len(sender.pending) < segment:
        sender.sent += 1
        messages += 1
        sender.pending += line(sender.name, sender.sent)
    send(sender, receiver, bytes(sender.pending[:segment]))
    del sender.pending[:segment]
    written += segment + 54 + 16
for client, server in pairs:
    for sender, receiver in ((client, server), (server, client)):
        while sender.pending:
            send(sender, receiver, bytes(sender.pending[:segment]))
            del sender.pending[:segment]
        packet(receiver.address, sender.address, receiver.port, sender.port, receiver.seq, sender.seq, ACK)
    packet(CLIENT, SERVER, client.port, server.port, client.seq, server.seq, FIN | ACK)
    packet(SERVER, CLIENT, server.port, client.port, server.seq, client.seq + 1, FIN | ACK)
    packet(CLIENT, SERVER, client.port, server.port, client.seq + 1, server.seq + 1, ACK)
out.close()
print("messages %d" % messages)
