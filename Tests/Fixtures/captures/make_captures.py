#!/usr/bin/env python3
"""Generates hand-made TCP captures for ChaosCaptureTests (needs scapy: pip install scapy).

usage: make_captures.py OUTPUT_DIR

Writes one capture per scenario plus manifest.json with what a correct reader must find: the
exact byte stream of each direction, and the capture-loss, retransmission and out-of-order
counts. The expected values come from how each capture is built here (which bytes were put on
the wire, which were left out of the capture), not from the reader under test.

Every scenario is one TCP conversation simulated segment by segment: the receiver acknowledges
what it has contiguously, a segment marked "uncaptured" travels (the receiver acknowledges it)
but is left out of the file, like a packet the capture dropped.
"""
import json
import random
import sys

from scapy.all import (IP, TCP, CookedLinux, CookedLinuxV2, Ether, IPv6, Loopback, PcapNgWriter,
                       Raw, wrpcap)
from scapy.utils import PcapWriter


def payload(length, seed):
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(length))


class Conversation:
    """Builds the packets of one TCP conversation, tracking what a correct reader reports."""

    def __init__(self, client, server, cport, sport, ipv6=False, isn_client=1000, isn_server=5000):
        self.ends = {"c": (client, cport), "s": (server, sport)}
        self.ipv6 = ipv6
        self.isn = {"c": isn_client, "s": isn_server}
        self.packets = []
        self.time = 1_700_000_000.0
        self.received = {"c": 0, "s": 0}  # contiguous bytes each receiver has (by sender)
        self.got = {"c": set(), "s": set()}  # byte offsets each sender's receiver holds
        self.captured = {"c": {}, "s": {}}  # offset -> byte, as captured
        self.captured_total = {"c": 0, "s": 0}
        self.data = {"c": b"", "s": b""}
        self.fin_sent = {"c": False, "s": False}

    def _packet(self, sender, flags, seq, ack, load=b""):
        src, sport = self.ends[sender]
        dst, dport = self.ends["s" if sender == "c" else "c"]
        ip = IPv6(src=src, dst=dst) if self.ipv6 else IP(src=src, dst=dst, flags="DF")
        pkt = ip / TCP(sport=sport, dport=dport, seq=seq % 2**32, ack=ack % 2**32, flags=flags, window=65535)
        if load:
            pkt = pkt / Raw(load=load)
        self.time += 0.001
        pkt.time = self.time
        return pkt

    def _ack_value(self, receiver):
        sender = "s" if receiver == "c" else "c"
        value = self.isn[sender] + 1 + self.received[sender]
        return value + (1 if self.fin_sent[sender] and self.received[sender] == len(self.data[sender]) else 0)

    def handshake(self):
        self.packets.append(self._packet("c", "S", self.isn["c"], 0))
        self.packets.append(self._packet("s", "SA", self.isn["s"], self.isn["c"] + 1))
        self.packets.append(self._packet("c", "A", self.isn["c"] + 1, self.isn["s"] + 1))

    def send(self, sender, data, plan):
        """plan: list of (start, end, captured) byte ranges of `data`, in wire order."""
        receiver = "s" if sender == "c" else "c"
        self.data[sender] = data
        for start, end, captured in plan:
            load = data[start:end]
            pkt = self._packet(sender, "PA", self.isn[sender] + 1 + start, self._ack_value(sender), load)
            if captured:
                self.packets.append(pkt)
                self.captured_total[sender] += end - start
                for offset in range(start, end):
                    self.captured[sender].setdefault(offset, data[offset])
            self.got[sender].update(range(start, end))
            while self.received[sender] in self.got[sender]:
                self.received[sender] += 1
            self.packets.append(self._packet(receiver, "A", self.isn[receiver] + 1 + self.received[receiver],
                                             self._ack_value(receiver)))

    def fin(self, sender):
        receiver = "s" if sender == "c" else "c"
        seq = self.isn[sender] + 1 + len(self.data[sender])
        self.fin_sent[sender] = True
        self.packets.append(self._packet(sender, "FA", seq, self._ack_value(sender)))
        self.packets.append(self._packet(receiver, "A", self.isn[receiver] + 1 + self.received[receiver]
                                         + (1 if self.fin_sent[receiver] else 0), self._ack_value(receiver)))

    def expected(self):
        """What a correct reader reports for each direction."""
        result = {}
        loss_bytes = loss_holes = retransmitted = 0
        for sender in "cs":
            data = self.data[sender]
            have = self.captured[sender]
            stream = bytes(have[i] for i in sorted(have))
            missing = [i for i in range(len(data)) if i not in have]
            holes = sum(1 for k, i in enumerate(missing) if k == 0 or missing[k - 1] != i - 1)
            loss_bytes += len(missing)
            loss_holes += holes
            retransmitted += self.captured_total[sender] - len(have)
            result["up" if sender == "c" else "down"] = stream.hex()
        result.update(loss_bytes=loss_bytes, loss_holes=loss_holes, retransmitted_bytes=retransmitted)
        return result


def out_of_order(plan):
    """Segments a reader must hold: captured ones that arrive beyond a hole (no loss scenarios)."""
    nxt, held, count = 0, {}, 0
    for start, end, captured in plan:
        if not captured:
            continue
        if start > nxt:
            if start not in held:
                count += 1
                held[start] = end
            else:
                held[start] = max(held[start], end)
            continue
        nxt = max(nxt, end)
        while any(s <= nxt for s in held):
            for s in sorted(held):
                if s <= nxt:
                    nxt = max(nxt, held.pop(s))
    return count


def chunks(length, size):
    return [(i, min(i + size, length), True) for i in range(0, length, size)]


def frame(link, pkt):
    if link == "ethernet":  # like Linux `tcpdump -i lo`: zero MAC addresses
        return Ether(src="00:00:00:00:00:00", dst="00:00:00:00:00:00") / pkt
    if link == "sll":
        return CookedLinux(pkttype=0, lladdrtype=772, lladdrlen=6, proto=0x86DD if IPv6 in pkt else 0x0800) / pkt
    if link == "sll2":
        return CookedLinuxV2(proto=0x86DD if IPv6 in pkt else 0x0800, ifindex=1, lladdrtype=772) / pkt
    if link == "null":
        return Loopback(type=24 if IPv6 in pkt else 2) / pkt
    return pkt  # raw


def write(path, link, packets, pcapng=False):
    framed = []
    for pkt in packets:
        f = frame(link, pkt)
        f.time = pkt.time
        framed.append(f)
    if pcapng:
        writer = PcapNgWriter(path)
        for f in framed:
            writer.write(f)
        writer.close()
    elif link == "raw":
        writer = PcapWriter(path, linktype=101)
        for f in framed:
            writer.write(f)
        writer.close()
    else:
        wrpcap(path, framed)


def scenario(name, link, ipv6, up_plan, down_plan, up_len, down_len, pcapng=False, isn=(1000, 5000), check_ooo=True):
    conv = Conversation("fd00::1" if ipv6 else "10.0.0.1", "fd00::2" if ipv6 else "10.0.0.2", 40000, 7001,
                        ipv6=ipv6, isn_client=isn[0], isn_server=isn[1])
    conv.handshake()
    conv.send("c", payload(up_len, sum(name.encode()) % 1000 + 1), up_plan)
    conv.send("s", payload(down_len, sum(name.encode()) % 1000 + 2), down_plan)
    conv.fin("c")
    conv.fin("s")
    path = f"{OUT}/{name}.{'pcapng' if pcapng else 'pcap'}"
    write(path, link, conv.packets, pcapng)
    entry = conv.expected()
    entry.update(name=name, file=path, link=link,
                 out_of_order=(out_of_order(up_plan) + out_of_order(down_plan)) if check_ooo else None)
    return entry


def shuffled(plan, seed):
    plan = list(plan)
    random.Random(seed).shuffle(plan)
    return plan


OUT = sys.argv[1] if len(sys.argv) > 1 else "."
random.seed(7)
up = chunks(3000, 100)
manifest = [
    # 30 segments in a shuffled order, sequence numbers wrapping past 2^32.
    scenario("reordered-ethernet-ipv4", "ethernet", False, shuffled(up, 1), chunks(1200, 400), 3000, 1200,
             isn=(2**32 - 1500, 2**32 - 200)),
    # Every third segment sent twice (a retransmission) and some sent out of order.
    scenario("retransmitted-sll-ipv6", "sll", True,
             [s for i, s in enumerate(up) for _ in range(2 if i % 3 == 0 else 1)][::-1][:10][::-1]
             + [s for i, s in enumerate(up) for _ in range(2 if i % 3 == 0 else 1)][:-10],
             chunks(500, 250) + [(0, 250, True)], 3000, 500),
    # Overlapping segments with different boundaries (the first copy of each byte wins).
    scenario("overlapping-raw-ipv4", "raw", False,
             [(0, 150, True), (100, 300, True), (250, 260, True), (400, 500, True), (280, 450, True),
              (500, 800, True), (450, 700, True), (800, 1000, True)], chunks(300, 100), 1000, 300),
    # One segment the capture dropped (the receiver acknowledged it) and one dropped before the FIN.
    scenario("missing-segment-null-ipv6", "null", True,
             [s if i not in (7, 29) else (s[0], s[1], False) for i, s in enumerate(up)], chunks(400, 200),
             3000, 400, check_ooo=False),
    # A reordered conversation in pcapng with Linux cooked v2 headers.
    scenario("reordered-sll2-pcapng", "sll2", False, shuffled(up, 2), shuffled(chunks(900, 300), 3), 3000, 900,
             pcapng=True),
]
with open(f"{OUT}/manifest.json", "w") as fh:
    json.dump(manifest, fh, indent=1)
print(f"wrote {len(manifest)} captures to {OUT}")
