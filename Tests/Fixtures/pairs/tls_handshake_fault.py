#!/usr/bin/env python3
"""The `handshake` fault seen by Python's ssl module (OpenSSL), nothing of chaos's own code on the client side.

  tls_handshake_fault.py CHAOS DIR

Makes certificates (trustme) in DIR, starts a TLS echo server with its own certificate, starts
`CHAOS proxy --tls-upstream DIR/upstream-ca.pem --api …` with CHAOS_HOME=DIR, and drives it through the control API:

  1. a connection that completed its handshake before any fault keeps echoing through both faults;
  2. POST /faults {"handshake": {"mode": "fail"}}: a new client's handshake fails with a handshake_failure alert;
  3. DELETE it: a new handshake completes and echoes;
  4. POST {"handshake": {"mode": "stall"}}: a new client's handshake gets no answer (a 1 s timeout fires); a second
     client waits; DELETE the stall: that client's handshake completes and echoes;
  5. POST /proxies with a `tls` block makes a second TLS proxy (GET shows the block, a client completes its handshake
     through it); a `tls` block naming a missing roots file is a 400 naming tls.upstream; `"tls": false` ends it.

Prints one line per check and "PASS" at the end; exits 1 at the first check that fails.
"""
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

import trustme

CHAOS, DIRECTORY = sys.argv[1], sys.argv[2]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fail(message):
    print("FAIL:", message, flush=True)
    sys.exit(1)


def api(method, path, body=None):
    request = urllib.request.Request(f"http://127.0.0.1:{API}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read().decode()
            return response.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def echo_server(context, listener):
    def serve(connection):
        try:
            with context.wrap_socket(connection, server_side=True) as tls:
                while data := tls.recv(4096):
                    tls.sendall(data)
        except (ssl.SSLError, OSError):
            pass

    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=serve, args=(connection,), daemon=True).start()


def handshake(timeout, port=None):
    """One new client: 'ok' (handshake done, one echo), 'alert: …' or 'timeout'."""
    context = ssl.create_default_context(cafile=os.path.join(DIRECTORY, "chaos-ca.pem"))
    raw = socket.create_connection(("127.0.0.1", port or PROXY), timeout=timeout)
    try:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"ping\n")
            return "ok" if tls.recv(16) == b"ping\n" else "no echo"
    except TimeoutError:
        return "timeout"
    except socket.timeout:
        return "timeout"
    except ssl.SSLError as error:
        return f"alert: {error.reason}"
    except OSError as error:
        return f"error: {error}"
    finally:
        raw.close()


os.makedirs(DIRECTORY, exist_ok=True)
authority = trustme.CA()
authority.cert_pem.write_to_path(os.path.join(DIRECTORY, "upstream-ca.pem"))
server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
authority.issue_cert("localhost", "127.0.0.1").configure_cert(server_context)
listener = socket.create_server(("127.0.0.1", 0))
UPSTREAM = listener.getsockname()[1]
threading.Thread(target=echo_server, args=(server_context, listener), daemon=True).start()

PROXY, API = free_port(), free_port()
environment = dict(os.environ, CHAOS_HOME=DIRECTORY)
exported = subprocess.run([CHAOS, "ca", "--export", os.path.join(DIRECTORY, "chaos-ca.pem")], env=environment,
                          capture_output=True, timeout=30)
if exported.returncode != 0:
    fail(f"chaos ca --export: {exported.stderr.decode()}")
proxy = subprocess.Popen([CHAOS, "proxy", "--listen", f"127.0.0.1:{PROXY}", "--upstream", f"127.0.0.1:{UPSTREAM}",
                          "--tls-upstream", os.path.join(DIRECTORY, "upstream-ca.pem"), "--api", f"127.0.0.1:{API}"],
                         env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
try:
    for _ in range(200):
        try:
            if api("GET", "/version")[0] == 200:
                break
        except OSError:
            time.sleep(0.05)
    else:
        fail("chaos proxy did not answer on its API in 10 s")

    # 1. A connection past its handshake before any fault.
    live_context = ssl.create_default_context(cafile=os.path.join(DIRECTORY, "chaos-ca.pem"))
    live = live_context.wrap_socket(socket.create_connection(("127.0.0.1", PROXY), timeout=10), server_hostname="localhost")

    def live_echoes(tag):
        live.sendall(f"{tag}\n".encode())
        got = live.recv(64)
        if got != f"{tag}\n".encode():
            fail(f"the live connection did not echo '{tag}' (got {got!r})")

    live_echoes("before")
    print("live connection: handshake done, echoes", flush=True)

    # 2. fail
    status, body = api("POST", "/faults", {"handshake": {"mode": "fail"}})
    if status != 201:
        fail(f"POST handshake fail: {status} {body}")
    outcome = handshake(timeout=10)
    if "HANDSHAKE_FAILURE" not in outcome.upper():
        fail(f"a handshake during mode fail: expected a handshake_failure alert, got {outcome}")
    print(f"mode fail: a new client's handshake: {outcome}", flush=True)
    live_echoes("during-fail")
    print("mode fail: the live connection still echoes", flush=True)

    # 3. lifted
    if api("DELETE", f"/faults/{body['id']}")[0] != 200:
        fail("DELETE the fail fault")
    outcome = handshake(timeout=10)
    if outcome != "ok":
        fail(f"after the fail fault: expected ok, got {outcome}")
    print("lifted: a new client's handshake completes", flush=True)

    # 4. stall
    status, body = api("POST", "/faults", {"handshake": {"mode": "stall"}})
    if status != 201:
        fail(f"POST handshake stall: {status} {body}")
    outcome = handshake(timeout=1)
    if outcome != "timeout":
        fail(f"a handshake during mode stall: expected no answer within 1 s, got {outcome}")
    print("mode stall: a new client's handshake gets no answer (its 1 s timeout fired)", flush=True)
    waiting = {}
    waiter = threading.Thread(target=lambda: waiting.update(outcome=handshake(timeout=30)))
    waiter.start()
    time.sleep(0.5)
    if "outcome" in waiting:
        fail(f"a stalled handshake ended before the stall did: {waiting['outcome']}")
    live_echoes("during-stall")
    print("mode stall: the live connection still echoes", flush=True)
    if api("DELETE", f"/faults/{body['id']}")[0] != 200:
        fail("DELETE the stall fault")
    waiter.join(timeout=35)
    if waiting.get("outcome") != "ok":
        fail(f"the held handshake after the stall ended: expected ok, got {waiting.get('outcome')}")
    print("stall lifted: the held client's handshake completes and echoes", flush=True)
    live_echoes("after")
    live.close()

    # 5. TLS through the Toxiproxy API's proxy JSON
    second = free_port()
    roots = os.path.join(DIRECTORY, "upstream-ca.pem")
    status, body = api("POST", "/proxies", {"name": "second", "listen": f"127.0.0.1:{second}", "upstream": f"127.0.0.1:{UPSTREAM}",
                                            "tls": {"upstream": roots, "server_name": "localhost"}})
    if status != 201 or body.get("tls") != {"ca": "auto", "server_name": "localhost", "upstream": roots, "alpn": "mirror"}:
        fail(f"POST /proxies with tls: {status} {body}")
    outcome = handshake(timeout=10, port=second)
    if outcome != "ok":
        fail(f"a client through the API's TLS proxy: expected ok, got {outcome}")
    print("API: POST /proxies with a tls block makes a TLS proxy; a client completes its handshake through it", flush=True)
    status, body = api("POST", "/proxies", {"name": "third", "upstream": f"127.0.0.1:{UPSTREAM}", "tls": {"upstream": "missing.pem"}})
    if status != 400 or "tls.upstream" not in body:
        fail(f"a tls block with a missing roots file: expected 400 naming tls.upstream, got {status} {body}")
    print(f"API: a missing roots file is 400: {json.loads(body)['error']}", flush=True)
    status, body = api("POST", "/proxies/second", {"tls": False})
    if status != 200 or "tls" in body:
        fail(f'"tls": false: expected the proxy without tls, got {status} {body}')
    print('API: "tls": false makes it cleartext', flush=True)
    print("PASS", flush=True)
finally:
    proxy.terminate()
    try:
        output = proxy.communicate(timeout=10)[0].decode()
    except subprocess.TimeoutExpired:
        proxy.kill()
        output = proxy.communicate()[0].decode()
    if "Fatal error" in output or "panic" in output.lower():
        print(output)
        sys.exit(1)
    listener.close()
