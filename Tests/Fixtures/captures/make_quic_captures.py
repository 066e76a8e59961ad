#!/usr/bin/env python3
"""Makes the committed QUIC capture fixtures in Tests/Fixtures/captures/quic/ (nothing of chaos's own code): a real
QUIC conversation between PyPI's aioquic client and server on loopback (Tests/Fixtures/pairs/quic_pair.py), captured
by `tcpdump -i lo`, with the NSS key log the client wrote and a JSON file saying what tshark decrypted and what each
end's log says it read.

Regenerate (as root: tcpdump captures; needs tcpdump, tshark, trustme, and aioquic in ~/.cache/chaos-peers/aioquic,
which `make deps` installs):

    python3 Tests/Fixtures/captures/make_quic_captures.py                # into Tests/Fixtures/captures/quic/
    python3 Tests/Fixtures/captures/make_quic_captures.py DIR            # elsewhere
    python3 Tests/Fixtures/captures/make_quic_captures.py --http3 [DIR]  # the same messages over HTTP/3: aioquic-http3.*

Every run makes new keys, connection IDs and timestamps, so the files change byte for byte.

It gives three files:
  aioquic-lines.pcap  tcpdump -i lo 'udp port P': one QUIC v1 connection, handshake to CONNECTION_CLOSE, the client
                      sending 30 newline-JSON MSG lines (seq 1…30) on each of 2 bidirectional streams (c1-0, c1-1)
                      and finishing them, the server answering each with a MSG of its own numbering on the same stream
  aioquic-lines.keys  the key log the client wrote (QuicConfiguration.secrets_log_file)
  aioquic-lines.json  the server port, the cipher suite, and per direction ("upstream" client->server, "downstream"):
                      the datagrams, the packets tshark saw and decrypted with the key log, its STREAM frames (types
                      0x08-0x0f) and their data bytes, and per stream name the seqs the receiving end's log read

With --http3 the pair speaks HTTP/3 (quic_pair.py --http3: each stream a POST /lines?stream=NAME whose NDJSON body the
client streams and whose response body the server streams back), and the files are aioquic-http3.pcap, .keys, .json.

The generator checks before keeping the files: tshark must decrypt every packet of both directions, and the seqs each
end read must be 1…30 on both streams.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PAIR = os.path.join(HERE, "..", "pairs", "quic_pair.py")
PEERS = os.path.expanduser("~/.cache/chaos-peers/aioquic")
STREAMS, MESSAGES = 2, 30


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_log(path, direction):
    seqs = {}
    with open(path) as file:
        for line in file:
            entry = json.loads(line)
            if entry.get("dir") == direction:
                seqs.setdefault(entry["stream"], []).append(entry["seq"])
    return {name: sorted(values) for name, values in seqs.items()}


def tshark_counts(pcap, keys, port):
    fields = ["udp.srcport", "quic.packet_number", "quic.frame_type", "quic.stream_data", "tls.handshake.ciphersuite"]
    command = ["tshark", "-r", pcap, "-o", f"tls.keylog_file:{keys}", "-d", f"udp.port=={port},quic", "-T", "fields"]
    for field in fields:
        command += ["-e", field]
    output = subprocess.run(command + ["-E", "occurrence=a", "-E", "aggregator=;"], check=True, capture_output=True, text=True)
    counts = {d: {"datagrams": 0, "packets": 0, "decrypted_packets": 0, "stream_frames": 0, "stream_bytes": 0} for d in ("upstream", "downstream")}
    suite = None
    for line in output.stdout.splitlines():
        source, numbers, types, data, suites = (line.split("\t") + [""] * 5)[:5]
        direction = "downstream" if source == str(port) else "upstream"
        side = counts[direction]
        side["datagrams"] += 1
        decrypted = [n for n in numbers.split(";") if n]
        side["decrypted_packets"] += len(decrypted)
        side["stream_frames"] += sum(1 for t in types.split(";") if t and 8 <= int(t, 0) <= 15)
        side["stream_bytes"] += sum(len(chunk.replace(":", "")) // 2 for chunk in data.split(";") if chunk)
        if suites and suite is None and direction == "downstream":
            suite = int(suites.split(";")[0], 0)
    packets = subprocess.run(
        ["tshark", "-r", pcap, "-d", f"udp.port=={port},quic", "-T", "fields", "-e", "udp.srcport", "-e", "quic.header_form",
         "-E", "occurrence=a", "-E", "aggregator=;"],
        check=True, capture_output=True, text=True,
    )
    for line in packets.stdout.splitlines():
        source, forms = (line.split("\t") + [""])[:2]
        counts["downstream" if source == str(port) else "upstream"]["packets"] += len([f for f in forms.split(";") if f])
    return counts, suite


def main():
    arguments = sys.argv[1:]
    http3 = "--http3" in arguments
    arguments = [a for a in arguments if a != "--http3"]
    out = arguments[0] if arguments else os.path.join(HERE, "quic")
    name = "aioquic-http3" if http3 else "aioquic-lines"
    mode = ["--http3"] if http3 else []
    os.makedirs(out, exist_ok=True)
    port = free_udp_port()
    work = tempfile.mkdtemp(prefix="quic-fixture-")
    pcap, keys = os.path.join(out, f"{name}.pcap"), os.path.join(out, f"{name}.keys")
    for path in (pcap, keys):
        if os.path.exists(path):
            os.remove(path)
    env = dict(os.environ, PYTHONPATH=PEERS)
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "-w", pcap, f"udp port {port}"], stderr=subprocess.PIPE, text=True)
    dump.stderr.readline()  # "listening on lo…"
    server = subprocess.Popen(
        [sys.executable, PAIR, "server", *mode, "--listen", f"127.0.0.1:{port}", "--dir", work, "--keylog", os.path.join(work, "server.keys")],
        stdout=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert server.stdout.readline().strip() == "listening"
        client_log = os.path.join(work, "client.jsonl")
        status = subprocess.run(
            [sys.executable, PAIR, "client", *mode, "--connect", f"127.0.0.1:{port}", "--ca", os.path.join(work, "ca.pem"), "--log", client_log,
             "--keylog", keys, "--streams", str(STREAMS), "--messages", str(MESSAGES), "--interval", "0.005"],
            env=env, timeout=60,
        ).returncode
        assert status == 0, f"the client exited {status}"
        time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(10)
        time.sleep(0.3)
        dump.send_signal(signal.SIGINT)
        dump.wait(10)
    counts, suite = tshark_counts(pcap, keys, port)
    up, down = read_log(os.path.join(work, "server.jsonl"), "up"), read_log(client_log, "down")
    expected = {f"c1-{index}": list(range(1, MESSAGES + 1)) for index in range(STREAMS)}
    assert up == expected and down == expected, (up, down)
    for direction, side in counts.items():
        assert side["decrypted_packets"] == side["packets"] > 0, (direction, side)
    counts["upstream"]["seqs_read"] = up
    counts["downstream"]["seqs_read"] = down
    facts = {"server_port": port, "cipher_suite": suite, "streams": STREAMS, "messages": MESSAGES, **counts}
    with open(os.path.join(out, f"{name}.json"), "w") as file:
        json.dump(facts, file, indent=1, sort_keys=True)
        file.write("\n")
    print(json.dumps({k: v for k, v in facts.items() if k not in ("upstream", "downstream")}), counts["upstream"]["stream_frames"],
          counts["downstream"]["stream_frames"])


if __name__ == "__main__":
    main()
