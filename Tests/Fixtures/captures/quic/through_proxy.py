#!/usr/bin/env python3
"""Rewrites a capture of a QUIC pair's own path (client <-> server, as make_quic_captures.py takes it) into the capture
the same traffic makes through a chaos `udp://` proxy on loopback: each datagram twice, unchanged (the proxy forwards a
datagram as it is), first on its sender's leg to the proxy, then on the proxy's leg to its receiver. With --move-after N
the proxy's server leg moves to a new port once the client sent N datagrams (a `rebind`): the client's next datagram
goes out from the new port, and the server's answers go there from then on.

Usage: through_proxy.py SOURCE.pcap OUT.pcap --server-port PORT [--proxy-port PORT] [--move-after N]
"""
import argparse

from scapy.all import IP, UDP, Ether, Raw, rdpcap, wrpcap


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--server-port", type=int, required=True, help="the server's port in SOURCE")
    parser.add_argument("--proxy-port", type=int, default=40400, help="the proxy's listen port (its server legs: the next two)")
    parser.add_argument("--move-after", type=int, default=0, help="the client's datagrams before the server leg moves (0: never)")
    args = parser.parse_args()
    proxy = "127.0.0.1"
    legs = [args.proxy_port + 1, args.proxy_port + 2]
    out = []
    sent = 0
    moved = False
    for packet in rdpcap(args.source):
        if UDP not in packet:
            continue
        ip, udp = packet[IP], packet[UDP]
        payload = bytes(udp.payload)
        if udp.dport == args.server_port:
            moved = moved or (args.move_after > 0 and sent >= args.move_after)
            sent += 1
            hops = [(ip.src, udp.sport, proxy, args.proxy_port), (proxy, legs[moved], ip.dst, udp.dport)]
        else:
            hops = [(ip.src, udp.sport, proxy, legs[moved]), (proxy, args.proxy_port, ip.dst, udp.dport)]
        for index, (src, sport, dst, dport) in enumerate(hops):
            hop = Ether() / IP(src=src, dst=dst) / UDP(sport=sport, dport=dport) / Raw(payload)
            hop.time = packet.time + index * 0.00001
            out.append(hop)
    wrpcap(args.out, out)
    print(f"{len(out)} datagrams, the client's {sent}, the server leg moved: {moved}")


if __name__ == "__main__":
    main()
