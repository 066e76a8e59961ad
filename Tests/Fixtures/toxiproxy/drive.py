"""Drives `chaos proxy --api` with the real Toxiproxy client (toxiproxy-python) and measures each toxic on real
sockets. Usage: CHAOS=path/to/chaos drive.py CHECK. Prints one line per measurement; exits 0 when CHECK holds.
Every wait is bounded; times are compared with the same path's time without the toxic, or as ratios."""
import sys, time, socket, json, tempfile, subprocess

import requests
from prometheus_client.parser import text_string_to_metric_families
from support import *


def api(chaos):
    """Status codes and bodies, raw, then through the client's exceptions."""
    up = Upstream(echo)
    created = requests.post(chaos.url + "/proxies", json={"name": "db", "listen": "127.0.0.1:0", "upstream": up.address})
    check(created.status_code == 201 and created.json()["enabled"] and created.json()["toxics"] == [], "POST /proxies: 201 %s" % created.text.strip())
    check(not created.json()["listen"].endswith(":0"), "listen shows the bound port")
    again = requests.post(chaos.url + "/proxies", json={"name": "db", "upstream": up.address})
    check(again.status_code == 409 and again.json() == {"error": "proxy already exists", "status": 409}, "409 %s" % again.text.strip())
    missing = requests.get(chaos.url + "/proxies/nope")
    check(missing.status_code == 404 and missing.json() == {"error": "proxy not found", "status": 404}, "404 %s" % missing.text.strip())
    bad = requests.post(chaos.url + "/proxies", data="{not json")
    check(bad.status_code == 400 and bad.json()["error"].startswith("bad request body") and bad.json()["status"] == 400, "400 %s" % bad.text.strip())
    nameless = requests.post(chaos.url + "/proxies", json={"upstream": up.address})
    check(nameless.json() == {"error": "missing required field: name", "status": 400}, "400 %s" % nameless.text.strip())
    toxic = requests.post(chaos.url + "/proxies/db/toxics", json={"type": "latency", "attributes": {"latency": 10}})
    check(toxic.status_code == 200 and toxic.json() == {"name": "latency_downstream", "type": "latency", "stream": "downstream",
          "toxicity": 1.0, "attributes": {"latency": 10, "jitter": 0}}, "toxic defaults: 200 %s" % toxic.text.strip())
    dup = requests.post(chaos.url + "/proxies/db/toxics", json={"type": "latency"})
    check(dup.status_code == 409 and dup.json()["error"] == "toxic already exists", "409 %s" % dup.text.strip())
    stream = requests.post(chaos.url + "/proxies/db/toxics", json={"type": "latency", "stream": "sideways"})
    check(stream.status_code == 400 and "stream was invalid" in stream.json()["error"], "400 %s" % stream.text.strip())
    updated = requests.post(chaos.url + "/proxies/db/toxics/latency_downstream", json={"attributes": {"jitter": 5}})
    check(updated.status_code == 200 and updated.json()["attributes"] == {"latency": 10, "jitter": 5}, "toxic update %s" % updated.text.strip())
    check(requests.get(chaos.url + "/proxies/db/toxics/nope").status_code == 404, "unknown toxic: 404")
    deleted = requests.delete(chaos.url + "/proxies/db/toxics/latency_downstream")
    check(deleted.status_code == 204 and deleted.content == b"", "DELETE toxic: 204, no body")
    check(requests.get(chaos.url + "/proxies/db/toxics").json() == [], "GET toxics: []")
    version = requests.get(chaos.url + "/version")
    check(version.status_code == 200 and "version" in version.json(), "GET /version %s" % version.text.strip())
    check(requests.delete(chaos.url + "/proxies/db").status_code == 204, "DELETE proxy: 204")
    # The client's own view.
    proxy = chaos.server.create(upstream=up.address, name="cache")
    check(proxy.listen.startswith("127.0.0.1:") and proxy.enabled, "client create: %s" % proxy.listen)
    for call, error in [(lambda: chaos.server.create(upstream=up.address, name="cache"), ProxyExists),
                        (lambda: proxy.add_toxic(type="nonsense"), InvalidToxic),
                        (lambda: proxy.destroy_toxic("nope"), NotFound)]:
        try:
            call()
            check(False, "%s raised" % error.__name__)
        except error:
            check(True, "client raises %s" % error.__name__)
    populated = requests.post(chaos.url + "/populate", json=[{"name": "cache", "listen": "127.0.0.1:0", "upstream": up.address},
                                                                {"name": "queue", "listen": "127.0.0.1:0", "upstream": up.address}])
    check(populated.status_code == 201 and sorted(p["name"] for p in populated.json()["proxies"]) == ["cache", "queue"],
          "POST /populate: 201 with both")
    check(sorted(chaos.server.proxies()) == ["cache", "queue"], "both listed")
    bad_populate = requests.post(chaos.url + "/populate", json=[{"name": "x"}])
    check(bad_populate.json() == {"error": "missing required field: upstream at proxy 1", "status": 400}, "populate 400 %s" % bad_populate.text.strip())
    chaos.server.populate([{"name": "web", "listen": "127.0.0.1:0", "upstream": up.address}])
    check("web" in chaos.server.proxies(), "client populate")
    queue = chaos.server.get_proxy("queue")
    queue.add_toxic(type="latency", attributes={"latency": 100})
    queue.disable()
    reset = requests.post(chaos.url + "/reset")
    check(reset.status_code == 204, "POST /reset: 204")
    after = requests.get(chaos.url + "/proxies/queue").json()
    check(after["enabled"] and after["toxics"] == [], "reset: enabled, no toxics")


def latency(chaos):
    proxy = chaos.server.create(upstream=Upstream(echo).address, name="p")
    client = connect(proxy)
    base = min(round_trip(client) for _ in range(5))
    proxy.add_toxic(type="latency", attributes={"latency": 300, "jitter": 0})
    slow = round_trip(client)
    say("round trip %.4f s without, %.4f s with a 300 ms downstream latency" % (base, slow))
    check(slow - base >= 0.295, "latency added: %.3f s" % (slow - base))
    proxy.destroy_toxic("latency_downstream")
    after = min(round_trip(client) for _ in range(3))
    check(after < 0.295, "removed: %.4f s" % after)


def bandwidth(chaos):
    size, rate = 600_000, 200  # bytes, KB/s (Toxiproxy's KB is 1000 bytes)

    def source(connection):
        connection.recv(1)
        connection.sendall(b"x" * size)
        connection.close()

    proxy = chaos.server.create(upstream=Upstream(source).address, name="p")
    proxy.add_toxic(type="bandwidth", attributes={"rate": rate})
    client = connect(proxy)
    client.sendall(b"g")
    first = client.recv(65536)
    start = time.monotonic()
    received = len(first) + len(read_to_end(client))
    elapsed = time.monotonic() - start
    measured = (received - len(first)) / elapsed / 1000
    say("%d bytes in %.3f s: %.1f KB/s for a %d KB/s toxic (ratio %.3f)" % (received, elapsed, measured, rate, measured / rate))
    check(received == size, "every byte arrived")
    check(0.9 <= measured / rate <= 1.1, "bandwidth within 10 %")


def slicer(chaos):
    proxy = chaos.server.create(upstream=Upstream(echo).address, name="p")
    proxy.add_toxic(type="slicer", attributes={"average_size": 10, "size_variation": 0, "delay": 5000})
    client = connect(proxy)
    client.sendall(b"a" * 100)
    pieces = []
    while sum(map(len, pieces)) < 100:
        pieces.append(client.recv(65536))
    say("100 bytes arrived in %d reads, the largest %d bytes" % (len(pieces), max(map(len, pieces))))
    check(len(pieces) >= 5 and sum(map(len, pieces)) == 100, "sliced, nothing lost")


def timeout(chaos):
    up = Upstream(echo)
    proxy = chaos.server.create(upstream=up.address, name="p")
    client = connect(proxy)
    proxy.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 0})
    client.sendall(b"held")
    client.settimeout(1.0)
    try:
        data = client.recv(100)
        check(False, "timeout 0 holds, got %r" % data)
    except socket.timeout:
        check(True, "timeout 0: nothing passes for 1 s, the connection stays open")
    proxy.destroy_toxic("timeout_upstream")
    client.settimeout(15)
    check(client.recv(100) == b"held", "removed: the held bytes pass")
    proxy.add_toxic(type="timeout", attributes={"timeout": 500})
    closing = connect(proxy)
    start = time.monotonic()
    closing.sendall(b"x")
    rest = read_to_end(closing)
    waited = time.monotonic() - start
    say("timeout 500: closed after %.3f s" % waited)
    check(rest == b"" and waited >= 0.45, "timeout 500: nothing passes, then the connection is closed")


def reset_peer(chaos):
    proxy = chaos.server.create(upstream=Upstream(echo).address, name="p")
    proxy.add_toxic(type="reset_peer", attributes={"timeout": 200})
    client = connect(proxy)
    start = time.monotonic()
    try:
        read_to_end(client)
        check(False, "reset_peer: ECONNRESET")
    except ConnectionResetError:
        check(True, "reset_peer: ECONNRESET after %.3f s" % (time.monotonic() - start))


def limit_data(chaos):
    def source(connection):
        connection.recv(1)
        connection.sendall(b"y" * 5000)
        time.sleep(5)

    proxy = chaos.server.create(upstream=Upstream(source).address, name="p")
    proxy.add_toxic(type="limit_data", attributes={"bytes": 1000})
    client = connect(proxy)
    client.sendall(b"g")
    received = read_to_end(client)
    check(len(received) == 1000, "limit_data 1000: %d bytes, then the connection closed" % len(received))


def slow_close(chaos):
    def closer(connection):
        connection.recv(1)
        connection.close()

    proxy = chaos.server.create(upstream=Upstream(closer).address, name="p")
    client = connect(proxy)
    start = time.monotonic()
    client.sendall(b"g")
    read_to_end(client)
    plain = time.monotonic() - start
    proxy.add_toxic(type="slow_close", attributes={"delay": 500})
    client = connect(proxy)
    start = time.monotonic()
    client.sendall(b"g")
    read_to_end(client)
    slow = time.monotonic() - start
    check(slow - plain >= 0.45, "slow_close 500: the FIN came %.3f s later" % (slow - plain))


def disabled(chaos):
    proxy = chaos.server.create(upstream=Upstream(echo).address, name="p")
    client = connect(proxy)
    round_trip(client)
    proxy.disable()
    check(read_to_end(client) == b"", "an open connection ends with a FIN (EOF, not a reset)")
    try:
        connect(proxy)
        check(False, "a disabled proxy refuses")
    except ConnectionRefusedError:
        check(True, "a new connection gets ECONNREFUSED")
    proxy.enable()
    check(round_trip(connect(proxy)) < 5, "enabled again: connects")


def correct_tcp(chaos):
    """Where Toxiproxy is wrong: a down upstream resets the client; a half-close is passed on."""
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead_port = dead.getsockname()[1]
    dead.close()
    down = chaos.server.create(upstream="127.0.0.1:%d" % dead_port, name="down")
    try:
        read_to_end(connect(down))
        check(False, "a down upstream resets the client")
    except ConnectionResetError:
        check(True, "a down upstream: ECONNRESET, not accept-then-EOF")
    proxy = chaos.server.create(upstream=Upstream(echo).address, name="p")
    client = connect(proxy)
    client.sendall(b"abc")
    client.shutdown(socket.SHUT_WR)
    check(read_to_end(client) == b"abcbye", "half-close passed on: the server still answered after our FIN")


def toxicity(chaos):
    """toxicity 0.5 over 16 connections: some delayed, some not, and the same ones with the same seed."""
    def pattern(seed):
        with Chaos(seed=seed) as run:
            proxy = run.server.create(upstream=Upstream(echo).address, name="p")
            proxy.add_toxic(type="latency", toxicity=0.5, attributes={"latency": 200})
            return "".join("S" if round_trip(connect(proxy)) >= 0.195 else "f" for _ in range(16))
    first, second = pattern(11), pattern(11)
    say("seed 11: %s then %s" % (first, second))
    check(first == second and 0 < first.count("S") < 16, "toxicity drawn per connection from the seed")


def metrics(chaos):
    proxy = chaos.server.create(upstream=Upstream(echo).address, name="p")
    client = connect(proxy)

    def upstream_bytes():
        text = requests.get(chaos.url + "/metrics").text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "chaos_bytes_total" and sample.labels == {"proxy": "p", "direction": "upstream"}:
                    return sample.value
        return None

    before = upstream_bytes()
    round_trip(client, b"z" * 1000)
    after = upstream_bytes()
    check(before is not None and after - before == 1000, "chaos_bytes_total moved by 1000 while the connection is open")


def faults(chaos):
    proxy = chaos.server.create(upstream=Upstream(echo).address, name="p")
    client = connect(proxy)
    base = min(round_trip(client) for _ in range(3))
    added = requests.post(chaos.url + "/faults", data=json.dumps({"latency": {"add": "200ms", "direction": "downstream"}}))
    check(added.status_code == 201, "POST /faults on the same port: 201")
    check(round_trip(client) - base >= 0.195, "chaos's own fault applies")
    check(requests.delete(chaos.url + "/faults/%d" % added.json()["id"]).status_code == 200, "DELETE /faults/N")


def config(chaos_unused):
    up = Upstream(echo)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump([{"name": "a", "listen": "127.0.0.1:0", "upstream": up.address},
                   {"name": "b", "listen": "127.0.0.1:0", "upstream": up.address, "enabled": False}], file)
    with Chaos("--config", file.name) as run:
        proxies = run.server.proxies()
        check(sorted(proxies) == ["a", "b"] and proxies["a"].enabled and not proxies["b"].enabled, "--config: both, b disabled")
        check(round_trip(connect(proxies["a"])) < 5, "a relays")


def free_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def run_metrics(_):
    """`chaos run --metrics`: live counters during a scenario; a toxic and a fault added through the API show in
    report.json's faults like scheduled ones."""
    out = tempfile.mkdtemp(prefix="chaos-run-metrics-")
    api, listen, upstream = free_port(), free_port(), free_port()
    run = subprocess.Popen([CHAOS, "run", "Tests/Fixtures/scenarios/resilient-short.yaml", "--duration", "8s", "--out", out,
                            "--metrics", "127.0.0.1:%d" % api, "--set", "proxies.stream.listen=127.0.0.1:%d" % listen,
                            "--set", "proxies.stream.upstream=127.0.0.1:%d" % upstream],
                           cwd=ROOT, stdout=LOG, stderr=subprocess.STDOUT)
    url = "http://127.0.0.1:%d" % api

    def sample(name, labels):
        for family in text_string_to_metric_families(requests.get(url + "/metrics", timeout=5).text):
            for s in family.samples:
                if s.name == name and s.labels == labels:
                    return s.value
        return None

    try:
        deadline = time.time() + 30
        first = None
        while time.time() < deadline and not first:
            try:
                first = sample("chaos_bytes_total", {"proxy": "stream", "direction": "upstream"})
            except requests.ConnectionError:
                pass
            time.sleep(0.2)
        while time.time() < deadline and sample("chaos_connections_live", {"proxy": "stream"}) < 3:
            time.sleep(0.2)
        start = sample("chaos_bytes_total", {"proxy": "stream", "direction": "upstream"})
        time.sleep(1)
        later = sample("chaos_bytes_total", {"proxy": "stream", "direction": "upstream"})
        check(later > start, "bytes upstream moved from %d to %d while the pair's connections are open" % (start, later))
        server = Toxiproxy()
        server.update_api_consumer("127.0.0.1", api)
        server.get_proxy("stream").add_toxic(type="latency", name="api_latency", attributes={"latency": 20})
        fault = requests.post(url + "/faults", data=json.dumps({"stall": {"at": "0s", "for": "300ms"}}))
        check(fault.status_code == 201, "POST /faults during the run: 201")
        check(sample("chaos_faults_active", {"kind": "latency"}) == 1, "chaos_faults_active{kind=latency} is 1")
        check(run.wait(timeout=60) in (0, 1), "the run ended")
        with open(os.path.join(out, "report.json")) as file:
            report = json.load(file)
        kinds = [(f["kind"], f["occurrence"]) for f in report["faults"]]
        say("report.json faults: %s" % kinds)
        check(any(k == "latency" and o >= 1 << 40 for k, o in kinds), "the toxic is in report.json's faults")
        check(any(k == "stall" and o >= 1 << 40 for k, o in kinds), "the API fault is in report.json's faults")
    finally:
        if run.poll() is None:
            run.kill()


def live_audit(_):
    """`chaos proxy --protocol-from`: a toxic added through the API shows in GET /report and in the report.json
    written on exit; the audit's figures are on /metrics."""
    out = tempfile.mkdtemp(prefix="chaos-live-audit-")
    scenario = os.path.join(ROOT, "Tests/Fixtures/scenarios/resilient-short.yaml")

    def sink(connection):
        try:
            while connection.recv(65536):
                pass
        except OSError:
            pass

    with Chaos("--protocol-from", scenario, "--out", out) as chaos:
        proxy = chaos.server.create(upstream=Upstream(sink).address, name="audited")
        client = connect(proxy)
        for seq in range(1, 21):
            client.sendall(b'{"stream": "a", "seq": %d, "id": "a-%d"}\n' % (seq, seq))
        proxy.add_toxic(type="latency", name="slow", attributes={"latency": 50})
        for seq in range(21, 41):
            client.sendall(b'{"stream": "a", "seq": %d, "id": "a-%d"}\n' % (seq, seq))
        deadline = time.time() + 10
        report = {}
        while time.time() < deadline:
            report = requests.get(chaos.url + "/report").json()
            if report["totals"]["sent"] >= 40:
                break
            time.sleep(0.1)
        check(report["totals"]["sent"] == 40, "GET /report: 40 messages sent so far")
        live = [f for f in report["faults"] if f["kind"] == "latency" and f["detail"].get("added_by") == "control API"]
        check(len(live) == 1 and "slow" in live[0]["detail"]["what"], "GET /report: the toxic is in faults: %s" % live)
        sent = [s.value for family in text_string_to_metric_families(requests.get(chaos.url + "/metrics").text)
                for s in family.samples if s.name == "chaos_audit_messages" and s.labels == {"class": "sent"}]
        check(sent == [40], "/metrics: chaos_audit_messages{class=sent} = %s" % sent)
        client.close()
    with open(os.path.join(out, "report.json")) as file:
        written = json.load(file)
    kinds = [(f["kind"], f["detail"].get("added_by")) for f in written["faults"]]
    check(("latency", "control API") in kinds, "report.json written on exit lists the toxic: %s" % kinds)


LOG = open(os.path.join(tempfile.gettempdir(), "chaos-run-metrics.log"), "w")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

if __name__ == "__main__":
    name = sys.argv[1]
    if name in ("toxicity", "config", "run_metrics", "live_audit"):
        globals()[name](None)
    else:
        with Chaos() as chaos:
            globals()[name](chaos)
