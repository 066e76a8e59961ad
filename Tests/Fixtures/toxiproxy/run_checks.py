"""The checks that start chaos themselves (with their own flags, or twice): seeded toxicity, --config, a whole
`chaos run --metrics`, and `chaos proxy --protocol-from` with --out."""
import json, os, signal, socket, subprocess, tempfile, time

import requests
from prometheus_client.parser import text_string_to_metric_families
from support import *


def toxicity(chaos):
    """toxicity 0.5 over 16 connections: some delayed, some not, and the same ones with the same seed.

    A connection is delayed when the faster of its two round trips took the latency: the toxic holds every byte of
    the connections it reaches, while a stall of the loaded machine (or the first round trip waiting for the proxy's
    upstream connection) slows one round trip, not both. Classified by one round trip, a clean connection's 0.4 s
    stall read as delayed and the same seed seemed to draw differently (a fresh-clone CI run on bfd44e4c)."""
    def delayed(client):
        return min(round_trip(client), round_trip(client)) >= 0.395

    def pattern(seed):
        with Chaos(seed=seed) as run:
            proxy = run.server.create(upstream=Upstream(echo).address, name="p")
            proxy.add_toxic(type="latency", toxicity=0.5, attributes={"latency": 400})
            return "".join("S" if delayed(connect(proxy)) else "f" for _ in range(16))
    first, second = pattern(11), pattern(11)
    say("seed 11: %s then %s" % (first, second))
    check(first == second and 0 < first.count("S") < 16, "toxicity drawn per connection from the seed")


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
    report.json's faults like scheduled ones. The run is set to a minute and stopped with SIGINT once the checks are
    done: set to 8 s, a loaded machine's pair took most of it to start and the run had ended before the API's fault
    came (a fresh-clone run, s61q1)."""
    out = tempfile.mkdtemp(prefix="chaos-run-metrics-")
    log = tempfile.NamedTemporaryFile("w", prefix="chaos-run-metrics-", suffix=".log", delete=False)
    say("chaos's output: %s" % log.name)
    api, listen, upstream = free_port(), free_port(), free_port()
    run = subprocess.Popen([CHAOS, "run", "Tests/Fixtures/scenarios/resilient-short.yaml", "--duration", "60s", "--out", out,
                            "--metrics", "127.0.0.1:%d" % api, "--set", "proxies.stream.listen=127.0.0.1:%d" % listen,
                            "--set", "proxies.stream.upstream=127.0.0.1:%d" % upstream],
                           cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = "http://127.0.0.1:%d" % api

    def sample(name, labels, text=None):
        """The sample's value in `text` (one scrape, for figures compared with each other), else in a new scrape."""
        for family in text_string_to_metric_families(text if text is not None else requests.get(url + "/metrics", timeout=5).text):
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
        # A kind the scenario has none of: chaos_faults_active counts the scenario's faults too.
        server.get_proxy("stream").add_toxic(type="bandwidth", name="api_bandwidth", attributes={"rate": 100000})
        fault = requests.post(url + "/faults", data=json.dumps({"stall": {"for": "300ms"}}))
        check(fault.status_code == 201, "POST /faults during the run: 201")
        check(sample("chaos_faults_active", {"kind": "bandwidth"}) == 1, "chaos_faults_active{kind=bandwidth} is 1")
        for kind in ("bandwidth", "stall"):
            check(sample("chaos_fault_occurrences_total", {"kind": kind}) == 1, "chaos_fault_occurrences_total{kind=%s} is 1" % kind)
        # The scenario's disconnect at about 3 s: the pair reconnects, and the histogram counts it while the run goes on.
        # The count and the +Inf bucket from one scrape: a reconnect between two scrapes made them differ (s63q4).
        reconnects, inf = 0, None
        while time.time() < deadline + 10 and not reconnects and run.poll() is None:
            scrape = requests.get(url + "/metrics", timeout=5).text
            reconnects = sample("chaos_audit_reconnect_seconds_count", {}, scrape) or 0
            inf = sample("chaos_audit_reconnect_seconds_bucket", {"le": "+Inf"}, scrape)
            time.sleep(0.2)
        check(reconnects > 0 and inf == reconnects, "reconnect histogram: %s reconnects so far, +Inf bucket %s" % (reconnects, inf))
        run.send_signal(signal.SIGINT)
        check(run.wait(timeout=60) in (0, 1), "the run stopped on SIGINT")
        with open(os.path.join(out, "report.json")) as file:
            report = json.load(file)
        kinds = [(f["kind"], f["occurrence"]) for f in report["faults"]]
        say("report.json faults: %s" % kinds)
        check(any(k == "bandwidth" and o >= 1 << 40 for k, o in kinds), "the toxic is in report.json's faults")
        check(any(k == "stall" and o >= 1 << 40 for k, o in kinds), "the API fault is in report.json's faults")
    finally:
        stop(run)


def stop(run):
    """Stops a `chaos run` child as a user would (SIGTERM: it stops its pair and writes its report); killed only if
    it lingers, which would leave its pair's processes running."""
    if run.poll() is None:
        run.terminate()
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
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

def churn(_):
    """Toxics of every type added, changed and removed at random (seeded), proxies disabled and enabled, while
    eight connections carry traffic both ways and reconnect when cut: chaos never stops answering, and relays
    correctly afterwards."""
    import random, threading
    rng = random.Random(int(os.environ.get("CHURN_SEED", "5")))
    with Chaos() as chaos:
        up = Upstream(echo)
        proxy = chaos.server.create(upstream=up.address, name="busy")
        stop = time.time() + 6
        moved = [0]

        def traffic():
            while time.time() < stop:
                try:
                    client = connect(proxy)
                    client.settimeout(0.5)
                    while time.time() < stop:
                        client.sendall(b"m" * 2000)
                        moved[0] += len(client.recv(65536))
                except OSError:
                    time.sleep(0.05)

        workers = [threading.Thread(target=traffic, daemon=True) for _ in range(8)]
        for worker in workers:
            worker.start()
        kinds = [("latency", {"latency": 20, "jitter": 5}), ("bandwidth", {"rate": 50}), ("slow_close", {"delay": 50}),
                 ("timeout", {"timeout": 100}), ("timeout", {"timeout": 0}), ("reset_peer", {"timeout": 10}),
                 ("slicer", {"average_size": 50, "size_variation": 20, "delay": 100}), ("limit_data", {"bytes": 5000})]
        requests_made = 0
        while time.time() < stop:
            kind, attributes = rng.choice(kinds)
            stream = rng.choice(["upstream", "downstream"])
            name = "%s_%s" % (kind, stream)
            action = rng.random()
            session = requests.Session()
            if action < 0.5:
                session.post(chaos.url + "/proxies/busy/toxics", json={"type": kind, "stream": stream, "attributes": attributes,
                                                                       "toxicity": rng.choice([0.3, 1.0])})
            elif action < 0.65:
                session.post(chaos.url + "/proxies/busy/toxics/" + name, json={"attributes": attributes})
            elif action < 0.9:
                session.delete(chaos.url + "/proxies/busy/toxics/" + name)
            elif action < 0.95:
                session.post(chaos.url + "/proxies/busy", json={"enabled": rng.random() < 0.5})
            else:
                session.post(chaos.url + "/reset")
            requests_made += 1
        for worker in workers:
            worker.join(timeout=5)
        say("%d API requests during traffic; %d bytes echoed" % (requests_made, moved[0]))
        check(chaos.process.poll() is None, "chaos is still running")
        check(requests.post(chaos.url + "/reset").status_code == 204, "the API answers")
        client = connect(proxy)
        check(round_trip(client, b"after the storm") < 5, "the proxy relays after the churn")
        check(moved[0] > 0, "traffic flowed during the churn")


def flag_audit(_):
    """`chaos proxy --framing lines --seq n --stream s`: the protocol flags of chaos audit start a live audit too."""
    with Chaos("--framing", "lines", "--seq", "n", "--stream", "s") as chaos:
        proxy = chaos.server.create(upstream=Upstream(echo).address, name="flags")
        client = connect(proxy)
        for n in range(1, 6):
            round_trip(client, b'{"s": "x", "n": %d}\n' % n)
        report = requests.get(chaos.url + "/report").json()
        check(report["totals"]["sent"] == 10 and report["totals"]["lost"] == 0,
              "GET /report from the flags: %s sent (5 each way), %s lost" % (report["totals"]["sent"], report["totals"]["lost"]))


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

