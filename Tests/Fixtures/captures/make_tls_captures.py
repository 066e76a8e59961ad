#!/usr/bin/env python3
"""Makes the committed TLS capture fixtures in Tests/Fixtures/captures/tls/ (nothing of chaos's own code): real
TLS conversations between third-party stacks on loopback, each captured by `tcpdump -i lo`, with the NSS key log
the client wrote and a JSON file saying what the plaintext was.

Regenerate (as root: tcpdump captures; needs tcpdump, tshark, the openssl command and PyPI's trustme):

    python3 Tests/Fixtures/captures/make_tls_captures.py            # all cases, into Tests/Fixtures/captures/tls/
    python3 Tests/Fixtures/captures/make_tls_captures.py DIR CASE…  # some cases, elsewhere

Every run makes new keys, new certificates and new timestamps, so the files change byte for byte; what each
NAME.json says stays the same (apart from ports, sizes and the client random).

Each case NAME gives three files:
  NAME.pcap   tcpdump -i lo -w NAME.pcap 'tcp port P': one TCP conversation, handshake to FIN
  NAME.keys   the NSS key log the client wrote (Python: SSLContext.keylog_filename; openssl s_client -keylogfile)
  NAME.json   what was said: the TLS version and cipher suite the server chose, the stacks, the server port, the
              client random (hex, as in the key log), and per direction ("upstream" client->server, "downstream"
              server->client) the NDJSON lines of the plaintext, its bytes and SHA-256, its seqs, the seqs left out
              ("holes") and the seqs sent twice on the connection ("repeated"), the records by content type and the
              KeyUpdates that direction sent ("records": the TLS records it sent by content type, the inner type
              of TLS 1.3's encrypted ones, as tshark decrypted them with the key log).

The plaintext is newline-delimited JSON, both ways, on stream "c1":

    {"type":"MSG","stream":"c1","seq":17,"payload":"9f3a..."}

written in many small writes (a record each), some writes holding two lines, some lines cut across two writes,
and one line of 24,000 payload characters (over 2^14 bytes: more than one record). `chaos audit NAME.pcap
--keylog NAME.keys` (lines framing, seq and stream fields: the audit's defaults) should find, per direction, the
lines, holes and repeats said in NAME.json. The same conversation with another case's key log has no keys.

The generator checks each capture before keeping it: tshark with `-o tls.keylog_file:NAME.keys` must decrypt both
directions to exactly the bytes written (`-z follow,tls,raw`), the server's choice must be the case's version and
suite, and the KeyUpdate case must show KeyUpdate messages (handshake type 24) in the direction(s) said.

Cases (TLS 1.3 suites are pinned with an OPENSSL_CONF file, `Ciphersuites =` in ssl_conf's system_default: the
ssl module of Python 3.11 has no set_ciphersuites; TLS 1.2 ones with set_ciphers / -cipher):
  tls13-aes128gcm  Python ssl client <-> Python ssl server, TLS_AES_128_GCM_SHA256; downstream skips seq 20 and
                   sends seq 30 twice (an audit finds 1 lost and 1 duplicated there)
  tls13-aes256gcm  Python <-> Python, TLS_AES_256_GCM_SHA384 (RSA certificate)
  tls13-chacha20   Python <-> Python, TLS_CHACHA20_POLY1305_SHA256
  tls12-aes128gcm  Python <-> Python, TLS 1.2 ECDHE-ECDSA-AES128-GCM-SHA256
  tls12-aes256gcm  Python <-> Python, TLS 1.2 ECDHE-RSA-AES256-GCM-SHA384 (RSA certificate)
  tls12-chacha20   openssl s_client <-> Python, TLS 1.2 ECDHE-ECDSA-CHACHA20-POLY1305
  tls13-keyupdate  openssl s_client <-> Python, TLS_AES_128_GCM_SHA256; s_client's `k` command (a KeyUpdate) a
                   third of the way, its `K` (a KeyUpdate asking the peer for one: the server answers with its own)
                   two thirds of the way: the client sends two, the server one
"""
import asyncio
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "tls")

# name: (TLS version, suite as OpenSSL names it, IANA name, code point, client stack, certificate key type)
CASES = {
    "tls13-aes128gcm": ("1.3", "TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256", 0x1301, "python", "ecdsa"),
    "tls13-aes256gcm": ("1.3", "TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384", 0x1302, "python", "rsa"),
    "tls13-chacha20": ("1.3", "TLS_CHACHA20_POLY1305_SHA256", "TLS_CHACHA20_POLY1305_SHA256", 0x1303, "python", "ecdsa"),
    "tls12-aes128gcm": ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", 0xC02B,
                        "python", "ecdsa"),
    "tls12-aes256gcm": ("1.2", "ECDHE-RSA-AES256-GCM-SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", 0xC030,
                        "python", "rsa"),
    "tls12-chacha20": ("1.2", "ECDHE-ECDSA-CHACHA20-POLY1305", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", 0xCCA9,
                       "s_client", "ecdsa"),
    "tls13-keyupdate": ("1.3", "TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256", 0x1301, "s_client", "ecdsa"),
}
UP_LINES, DOWN_LINES, BIG_SEQ = 60, 40, 25
# Only the first case has a hole and a repeat (downstream), so an audit of it has something to find.
DOWN_HOLES = {"tls13-aes128gcm": [20]}
DOWN_REPEATS = {"tls13-aes128gcm": [30]}


def line(seq, big=False):
    """One NDJSON line; its payload is a function of (seq, big) alone."""
    payload = random.Random(seq * 7919 + big).randbytes(12_000 if big else 24).hex()
    return (json.dumps({"type": "MSG", "stream": "c1", "seq": seq, "payload": payload}, separators=(",", ":")) + "\n").encode()


def plan(count, holes=(), repeats=(), big_seq=None):
    """The seqs sent (in order) and the writes: one line each, but every 9th write holds two lines and every 11th
    line is cut in two writes."""
    seqs = []
    for seq in range(1, count + 1):
        if seq in holes:
            continue
        seqs.append(seq)
        if seq in repeats:
            seqs.append(seq)
    lines = [line(seq, seq == big_seq) for seq in seqs]
    writes, index = [], 0
    while index < len(lines):
        if index % 9 == 8 and index + 1 < len(lines):
            writes.append(lines[index] + lines[index + 1])
            index += 2
        elif index % 11 == 10:
            half = len(lines[index]) // 2
            writes += [lines[index][:half], lines[index][half:]]
            index += 1
        else:
            writes.append(lines[index])
            index += 1
    return seqs, writes


def directions(name):
    up = plan(UP_LINES, big_seq=BIG_SEQ)
    down = plan(DOWN_LINES, DOWN_HOLES.get(name, ()), DOWN_REPEATS.get(name, ()))
    return up, down


# ---------------------------------------------------------------------------------------------------------------
# The conversation itself, run in a child process (OPENSSL_CONF must be in its environment before OpenSSL starts).

async def serve_once(port, context, writes, pace, done):
    async def handle(reader, writer):
        async def send():
            for chunk in writes:
                writer.write(chunk)
                await writer.drain()
                await asyncio.sleep(pace)

        sending = asyncio.ensure_future(send())
        got = b""
        while True:
            data = await reader.read(65536)
            if not data:
                break
            got += data
        await sending
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, ssl.SSLError):
            pass
        done.set_result(got)

    return await asyncio.start_server(handle, "127.0.0.1", port, ssl=context)


async def python_client(port, name, ca, keys, writes, expected_down):
    version = CASES[name][0]
    context = ssl.create_default_context(cafile=ca)
    context.keylog_filename = keys
    pinned = ssl.TLSVersion.TLSv1_3 if version == "1.3" else ssl.TLSVersion.TLSv1_2
    context.minimum_version = context.maximum_version = pinned
    if version == "1.2":
        context.set_ciphers(CASES[name][1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="localhost")

    async def send():
        for chunk in writes:
            writer.write(chunk)
            await writer.drain()
            await asyncio.sleep(0.01)

    sending = asyncio.ensure_future(send())
    got = b""
    while len(got) < len(expected_down):
        data = await asyncio.wait_for(reader.read(65536), 20)
        if not data:
            break
        got += data
    await sending
    writer.close()  # close_notify, then the peer's, then FIN
    await writer.wait_closed()
    return got


async def s_client(port, name, ca, keys, writes, expected_down):
    version, suite = CASES[name][0], CASES[name][1]
    flags = ["-tls1_3", "-ciphersuites", suite] if version == "1.3" else ["-tls1_2", "-cipher", suite]
    # -quiet alone would imply -ign_eof, which turns the command letters off: -no_ign_eof turns them back on.
    process = await asyncio.create_subprocess_exec(
        "openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost", "-CAfile", ca,
        "-keylogfile", keys, "-quiet", "-no_ign_eof", *flags,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got = b""

    async def read():
        nonlocal got
        while len(got) < len(expected_down):
            data = await process.stdout.read(65536)
            if not data:
                break
            got += data

    reading = asyncio.ensure_future(read())
    await asyncio.sleep(0.5)  # the handshake
    commands = {len(writes) // 3: b"k\n", 2 * len(writes) // 3: b"K\n"} if name == "tls13-keyupdate" else {}
    for index, chunk in enumerate(writes):
        if index in commands:
            # A command is a read of its own: s_client takes a whole read() starting with k/K as the command.
            await asyncio.sleep(0.3)
            process.stdin.write(commands[index])
            await process.stdin.drain()
            await asyncio.sleep(0.3)
        process.stdin.write(chunk)
        await process.stdin.drain()
        await asyncio.sleep(0.03)  # each write its own read(), so its own record
    await asyncio.wait_for(reading, 20)
    await asyncio.sleep(0.3)
    process.stdin.close()  # s_client sends close_notify and closes
    await asyncio.wait_for(process.wait(), 10)
    errors = await process.stderr.read()
    return got, errors.decode(errors="replace")


async def conversation(name, port, folder):
    (up_seqs, up_writes), (down_seqs, down_writes) = directions(name)
    expected_up, expected_down = b"".join(up_writes), b"".join(down_writes)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(os.path.join(folder, "server.pem"))
    ca, keys = os.path.join(folder, "ca.pem"), os.path.join(folder, "keys.log")
    done = asyncio.get_running_loop().create_future()
    # Against s_client (which writes slower) the server writes over the whole conversation: OpenSSL sends the
    # KeyUpdate a peer asked for with its next write.
    pace = 0.02 if CASES[name][4] == "python" else 0.08
    server = await serve_once(port, server_context, down_writes, pace, done)
    stderr = ""
    if CASES[name][4] == "python":
        got_down = await python_client(port, name, ca, keys, up_writes, expected_down)
    else:
        got_down, stderr = await s_client(port, name, ca, keys, up_writes, expected_down)
    got_up = await asyncio.wait_for(done, 20)
    server.close()
    assert got_down == expected_down, f"client read {len(got_down)} of {len(expected_down)} bytes\n{stderr}"
    assert got_up == expected_up, f"server read {len(got_up)} of {len(expected_up)} bytes\n{stderr}"
    with open(os.path.join(folder, "client-stderr.txt"), "w") as handle:
        handle.write(stderr)


def child(name, port, folder):
    asyncio.run(conversation(name, port, folder))


# ---------------------------------------------------------------------------------------------------------------
# The parent: certificates, tcpdump, the child, tshark's checks, the files.

def free_port():
    for _ in range(200):
        port = random.randrange(20_000, 32_000)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port")


def tshark(*arguments):
    return subprocess.run(["tshark", *arguments], check=True, capture_output=True, text=True).stdout


def follow(pcap, keys, server_port):
    """Each direction's decrypted bytes, as tshark's `follow,tls,raw` gives them: rows from node 0 unindented, rows
    from node 1 indented by a tab (node 0 is whichever end tshark met first, so it is told by its port)."""
    text = tshark("-r", pcap, "-o", f"tls.keylog_file:{keys}", "-q", "-z", "follow,tls,raw,0")
    node0 = int(text.split("Node 0: ", 1)[1].split("\n", 1)[0].rsplit(":", 1)[1])
    node0_rows, node1_rows = [], []
    body = text.split("Node 1: ", 1)[1].split("\n", 1)[1]
    for row in body.split("\n"):
        if row.startswith("====") or not row.strip():
            continue
        (node1_rows if row.startswith("\t") else node0_rows).append(bytes.fromhex(row.strip()))
    node0_bytes, node1_bytes = b"".join(node0_rows), b"".join(node1_rows)
    return (node1_bytes, node0_bytes) if node0 == server_port else (node0_bytes, node1_bytes)


def records(pcap, keys, server_port):
    """Records per direction by (decrypted) content type, and KeyUpdates per direction."""
    counts = {"upstream": {}, "downstream": {}}
    names = {"20": "change_cipher_spec", "21": "alert", "22": "handshake", "23": "application_data"}
    rows = tshark("-r", pcap, "-o", f"tls.keylog_file:{keys}", "-Y", "tls", "-T", "fields", "-E", "occurrence=a",
                  "-E", "aggregator=,", "-e", "tcp.srcport", "-e", "tls.record.content_type")
    for row in rows.splitlines():
        port, _, types = row.partition("\t")
        side = "downstream" if int(port) == server_port else "upstream"
        for kind in filter(None, types.split(",")):
            counts[side][names.get(kind, kind)] = counts[side].get(names.get(kind, kind), 0) + 1
    updates = {"upstream": 0, "downstream": 0}
    rows = tshark("-r", pcap, "-o", f"tls.keylog_file:{keys}", "-Y", "tls.handshake.type == 24", "-T", "fields",
                  "-E", "occurrence=a", "-E", "aggregator=,", "-e", "tcp.srcport", "-e", "tls.handshake.type")
    for row in rows.splitlines():
        port, _, types = row.partition("\t")
        side = "downstream" if int(port) == server_port else "upstream"
        updates[side] += types.split(",").count("24")
    return counts, updates


def make(name, out, work):
    version, openssl_name, iana, code, client, key = CASES[name]
    folder = os.path.join(work, name)
    os.makedirs(folder)
    import trustme
    key_type = trustme.KeyType.RSA if key == "rsa" else trustme.KeyType.ECDSA
    ca = trustme.CA(key_type=key_type)
    ca.cert_pem.write_to_path(os.path.join(folder, "ca.pem"))
    ca.issue_cert("localhost", "127.0.0.1", key_type=key_type).private_key_and_cert_chain_pem.write_to_path(os.path.join(folder, "server.pem"))
    environment = dict(os.environ)
    if version == "1.3":
        conf = os.path.join(folder, "openssl.cnf")
        with open(conf, "w") as handle:
            handle.write("openssl_conf = openssl_init\n[openssl_init]\nssl_conf = ssl_sect\n[ssl_sect]\n"
                         "system_default = system_default_sect\n[system_default_sect]\n"
                         f"Ciphersuites = {openssl_name}\n")
        environment["OPENSSL_CONF"] = conf
    port = free_port()
    pcap = os.path.join(folder, "capture.pcap")
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-s", "0", "-w", pcap, f"tcp port {port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    line_ = dump.stderr.readline().decode()  # "listening on lo, ..." once it is attached
    assert "listening" in line_, line_
    try:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, str(port), folder],
                       env=environment, check=True, timeout=60)
        time.sleep(1.0)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(10)
    keys = os.path.join(folder, "keys.log")
    fins = tshark("-r", pcap, "-Y", "tcp.flags.fin == 1", "-T", "fields", "-e", "tcp.srcport").split()
    assert len(set(fins)) == 2, f"{name}: the capture lacks a FIN (from {fins})"

    # tshark decrypts both directions to exactly what was written: the key log is right.
    (up_seqs, up_writes), (down_seqs, down_writes) = directions(name)
    expected_up, expected_down = b"".join(up_writes), b"".join(down_writes)
    up, down = follow(pcap, keys, port)
    assert up == expected_up, f"{name}: tshark decrypted {len(up)} of {len(expected_up)} upstream bytes"
    assert down == expected_down, f"{name}: tshark decrypted {len(down)} of {len(expected_down)} downstream bytes"
    chosen = tshark("-r", pcap, "-Y", "tls.handshake.type == 2", "-T", "fields", "-e", "tls.handshake.ciphersuite",
                    "-e", "tls.handshake.extensions.supported_version").split()
    assert int(chosen[0], 16) == code, f"{name}: the server chose {chosen}"
    assert (len(chosen) > 1 and chosen[1] == "0x0304") == (version == "1.3"), f"{name}: {chosen}"
    client_random = tshark("-r", pcap, "-Y", "tls.handshake.type == 1", "-T", "fields",
                           "-e", "tls.handshake.random").split()[0].replace(":", "")
    assert client_random in open(keys).read(), f"{name}: the key log lacks the client random"
    counts, updates = records(pcap, keys, port)
    if name == "tls13-keyupdate":
        assert updates == {"upstream": 2, "downstream": 1}, f"{name}: KeyUpdates {updates}"
    else:
        assert updates == {"upstream": 0, "downstream": 0}, f"{name}: KeyUpdates {updates}"

    def direction(seqs, writes, holes, repeats):
        data = b"".join(writes)
        return {"lines": len(seqs), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "writes": len(writes),
                "seqs": seqs, "holes": holes, "repeated": repeats, "records": counts_for(seqs is up_seqs),
                "key_updates": updates["upstream" if seqs is up_seqs else "downstream"]}

    def counts_for(is_up):
        return dict(sorted(counts["upstream" if is_up else "downstream"].items()))

    stacks = {"python": f"Python {sys.version.split()[0]} ssl ({ssl.OPENSSL_VERSION})",
              "s_client": subprocess.run(["openssl", "version"], capture_output=True, text=True).stdout.strip()
              + " s_client"}
    manifest = {
        "name": name,
        "pcap": f"{name}.pcap",
        "keylog": f"{name}.keys",
        "tls_version": f"TLSv{version}",
        "cipher_suite": iana,
        "cipher_suite_openssl": openssl_name,
        "cipher_suite_id": f"0x{code:04X}",
        "certificate_key": key,
        "client": stacks[client],
        "server": stacks["python"],
        "server_port": port,
        "client_random": client_random,
        "framing": "lines (NDJSON), stream field `stream`, seq field `seq`",
        "upstream": direction(up_seqs, up_writes, [], []),
        "downstream": direction(down_seqs, down_writes, DOWN_HOLES.get(name, []), DOWN_REPEATS.get(name, [])),
        "checked_with": subprocess.run(["tshark", "--version"], capture_output=True, text=True).stdout.splitlines()[0],
    }
    os.makedirs(out, exist_ok=True)
    shutil.copyfile(pcap, os.path.join(out, f"{name}.pcap"))
    shutil.copyfile(keys, os.path.join(out, f"{name}.keys"))
    with open(os.path.join(out, f"{name}.json"), "w") as handle:
        text = json.dumps(manifest, indent=1)
        # Lists of seqs on one line each.
        text = re.sub(r"\[\s*([0-9,\s]*?)\s*\]", lambda m: "[" + ", ".join(m.group(1).replace(",", " ").split()) + "]", text)
        handle.write(text + "\n")
    size = os.path.getsize(pcap)
    print(f"{name}: {size} bytes, TLS {version} {iana}, up {len(up_seqs)} lines / down {len(down_seqs)} lines, "
          f"records up {manifest['upstream']['records']} down {manifest['downstream']['records']}, KeyUpdates {updates}")
    assert size < 100_000, f"{name}: {size} bytes"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    out = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT
    names = sys.argv[2:] or list(CASES)
    work = tempfile.mkdtemp(prefix="tls-captures-")
    for name in names:
        make(name, out, work)  # on a failed check, the work folder stays for a look
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
