#!/usr/bin/env python3
"""Writes the audit-throughput benchmark's traffic (Benchmarks/audit-throughput.sh): MESSAGES messages of about
SIZE bytes from one producer, as NDJSON lines, as masked WebSocket text frames after an upgrade request, and as
gRPC messages (one per DATA frame) on one call after the HTTP/2 preface, as MQTT 3.1.1 QoS 1 PUBLISH packets to
topic "b" after a CONNECT, and as Socket.IO events (`42["msg",{…}]`, one per masked WebSocket text frame) after an
Engine.IO WebSocket upgrade and a Socket.IO CONNECT, plus the canned answers a sink sends back (a 101 upgrade, HTTP/2
SETTINGS and response headers, a CONNACK, a 101 with Engine.IO's open packet and Socket.IO's CONNECT).

  audit_traffic.py DIR MESSAGES SIZE

Files: DIR/lines.bin, DIR/websocket.bin, DIR/websocket.answer, DIR/grpc.bin, DIR/grpc.answer, DIR/mqtt.bin,
DIR/mqtt.answer, DIR/socketio.bin, DIR/socketio.answer, and DIR/lines.answer (empty). Every message carries stream "b" and seq 1..MESSAGES (JSON field `seq`; protobuf field 1)."""
import os
import struct
import sys


def line(seq, size):
    head = b'{"type":"MSG","stream":"b","seq":%d,"payload":"' % seq
    pad = max(size - len(head) - 3, 1)
    return head + b"x" * pad + b'"}\n'


def ws_frame(payload, mask=b"\x11\x22\x33\x44"):
    """A text frame; masked as a client sends it, or (mask None) as a server does."""
    length = len(payload)
    bit = 0x80 if mask else 0
    if length < 126:
        header = bytes([0x81, bit | length])
    elif length < 65536:
        header = bytes([0x81, bit | 126]) + struct.pack(">H", length)
    else:
        header = bytes([0x81, bit | 127]) + struct.pack(">Q", length)
    if not mask:
        return header + payload
    key = (mask * (length // 4 + 1))[:length]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(length, "big")
    return header + mask + masked


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def h2_frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    """A literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2)."""
    name, value = name.encode(), value.encode()
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def mqtt_packet(kind_flags, body):
    """An MQTT control packet: its type and flags, the remaining length (1-4 bytes), the body."""
    length, encoded = len(body), bytearray()
    while True:
        byte = length & 0x7F
        length >>= 7
        encoded.append(byte | 0x80 if length else byte)
        if not length:
            return bytes([kind_flags]) + bytes(encoded) + body


def mqtt_string(text):
    return struct.pack(">H", len(text)) + text


def main():
    folder, messages, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(os.path.join(folder, "lines.bin"), "wb") as out:
        for seq in range(1, messages + 1):
            out.write(line(seq, size))
    open(os.path.join(folder, "lines.answer"), "wb").close()

    with open(os.path.join(folder, "websocket.bin"), "wb") as out:
        out.write(b"GET /bench HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        for seq in range(1, messages + 1):
            out.write(ws_frame(line(seq, size)[:-1]))
    with open(os.path.join(folder, "websocket.answer"), "wb") as out:
        out.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")

    headers = b"".join(hpack_literal(n, v) for n, v in [
        (":method", "POST"), (":scheme", "http"), (":path", "/bench.v1.Bench/Push"), (":authority", "127.0.0.1"),
        ("content-type", "application/grpc"), ("te", "trailers"), ("x-session", "b")])
    with open(os.path.join(folder, "grpc.bin"), "wb") as out:
        out.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, b"") + h2_frame(1, 4, 1, headers))
        for seq in range(1, messages + 1):
            pad = max(size - 16, 1)
            body = b"\x08" + varint(seq) + b"\x12" + varint(pad) + b"x" * pad
            out.write(h2_frame(0, 0, 1, b"\x00" + struct.pack(">I", len(body)) + body))
    with open(os.path.join(folder, "mqtt.bin"), "wb") as out:
        # CONNECT: MQTT 3.1.1, clean session, keepalive 60 s, client id "bench"; then QoS 1 PUBLISHes, packet ids 1..65535.
        out.write(mqtt_packet(0x10, mqtt_string(b"MQTT") + bytes([4, 0b10]) + struct.pack(">H", 60) + mqtt_string(b"bench")))
        for seq in range(1, messages + 1):
            packet_id = (seq - 1) % 65535 + 1
            out.write(mqtt_packet(0x32, mqtt_string(b"b") + struct.pack(">H", packet_id) + line(seq, size)[:-1]))
    with open(os.path.join(folder, "mqtt.answer"), "wb") as out:
        out.write(mqtt_packet(0x20, bytes([0, 0])))
    with open(os.path.join(folder, "socketio.bin"), "wb") as out:
        # Engine.IO v4 straight over WebSocket, Socket.IO's CONNECT to the main namespace, then one event per message.
        out.write(b"GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                  b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        out.write(ws_frame(b"40"))
        for seq in range(1, messages + 1):
            out.write(ws_frame(b'42["msg",' + line(seq, size)[:-1] + b"]"))
    with open(os.path.join(folder, "socketio.answer"), "wb") as out:
        out.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
        out.write(ws_frame(b'0{"sid":"b","upgrades":[],"pingInterval":25000,"pingTimeout":20000}', mask=None))
        out.write(ws_frame(b'40{"sid":"x"}', mask=None))
    with open(os.path.join(folder, "grpc.answer"), "wb") as out:
        out.write(h2_frame(4, 0, 0, b"") + h2_frame(4, 1, 0, b"")
                  + h2_frame(1, 4, 1, hpack_literal(":status", "200") + hpack_literal("content-type", "application/grpc")))


if __name__ == "__main__":
    main()
