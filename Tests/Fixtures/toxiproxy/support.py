"""What the Toxiproxy drop-in checks share: chaos as a child process, upstream servers, socket helpers."""
import json, os, socket, subprocess, sys, tempfile, threading, time

import requests
from toxiproxy import Toxiproxy
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

CHAOS = os.environ.get("CHAOS", "chaos")


def say(*parts):
    print(*parts, flush=True)


class Chaos:
    """`chaos proxy --api 127.0.0.1:0` as a child process; the API port is read from its first lines."""

    def __init__(self, *extra, seed=7):
        self.process = subprocess.Popen([CHAOS, "proxy", "--api", "127.0.0.1:0", "--seed", str(seed), *extra],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 30
        self.port = None
        while time.time() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            if line.startswith("control API: http://"):
                self.port = int(line.strip().rsplit(":", 1)[1])
                break
        assert self.port, "chaos proxy did not print its API address"
        threading.Thread(target=lambda: [None for _ in self.process.stdout], daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.port
        self.server = Toxiproxy()
        self.server.update_api_consumer("127.0.0.1", self.port)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.process.terminate()
        self.process.wait(timeout=20)


class Upstream:
    """A TCP server on 127.0.0.1 that runs `handler(socket)` per connection."""

    def __init__(self, handler):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.address = "127.0.0.1:%d" % self.port
        self.accepted = []
        threading.Thread(target=self._serve, args=(handler,), daemon=True).start()

    def _serve(self, handler):
        while True:
            connection, _ = self.listener.accept()
            self.accepted.append(connection)
            threading.Thread(target=handler, args=(connection,), daemon=True).start()


def echo(connection):
    """Echoes; on EOF sends `bye` and closes (so a passed-on half-close shows). A reset ends it quietly."""
    try:
        while True:
            data = connection.recv(65536)
            if not data:
                connection.sendall(b"bye")
                connection.close()
                return
            connection.sendall(data)
    except OSError:
        connection.close()


def connect(proxy):
    host, port = proxy.listen.rsplit(":", 1)
    client = socket.create_connection((host, int(port)), timeout=15)
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return client


def listen_of(chaos, name):
    return chaos.server.get_proxy(name)


def round_trip(client, payload=b"ping"):
    start = time.monotonic()
    client.sendall(payload)
    received = b""
    while len(received) < len(payload):
        received += client.recv(65536)
    return time.monotonic() - start


def read_to_end(client):
    received = b""
    while True:
        data = client.recv(65536)
        if not data:
            return received
        received += data


def check(condition, what):
    say(("ok  " if condition else "FAIL") + " " + what)
    if not condition:
        raise SystemExit(1)
