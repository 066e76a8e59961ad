#!/usr/bin/env python3
"""Seeds Fuzz/corpus/tls-capture/ from the TLS capture fixtures (Tests/Fixtures/captures/tls/): each seed is the
fixture's key log, a 0 byte, then its TCP payloads in capture order as [control, length (2 bytes), bytes] pieces
(control 0: client → server, 1: server → client; see FuzzTarget.tlsCapture). Needs tshark.

  python3 Fuzz/make_tls_capture_corpus.py
"""
import glob
import json
import os
import subprocess

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
fixtures = os.path.join(root, "Tests/Fixtures/captures/tls")
out = os.path.join(root, "Fuzz/corpus/tls-capture")
os.makedirs(out, exist_ok=True)
for facts_path in sorted(glob.glob(os.path.join(fixtures, "*.json"))):
    facts = json.load(open(facts_path))
    name = facts["name"]
    server_port = str(facts["server_port"])
    keys = open(os.path.join(fixtures, facts["keylog"]), "rb").read()
    fields = subprocess.run(["tshark", "-r", os.path.join(fixtures, facts["pcap"]), "-Y", "tcp.len > 0",
                             "-T", "fields", "-e", "tcp.dstport", "-e", "tcp.payload"],
                            check=True, capture_output=True, text=True).stdout
    seed = bytearray(keys + b"\0")
    for line in fields.splitlines():
        port, payload = line.split("\t")
        data = bytes.fromhex(payload.replace(":", ""))
        while data:
            piece, data = data[:65535], data[65535:]
            seed += bytes([0 if port == server_port else 1]) + len(piece).to_bytes(2, "big") + piece
    # Keep seeds small: the fuzzer mutates them; the first few KB hold the handshake and some records.
    open(os.path.join(out, name), "wb").write(bytes(seed[:12_000]))
    print(name, len(seed))
