#!/usr/bin/env bash
# A fleet of chaos agents on one machine, with network namespaces as hosts: servers, AGENTS agents and a "phone"
# (processes of up to 5,000 streams of the reference pair each) in namespaces of their own, joined by veth links to a
# bridge in a hub namespace. Nothing is added to the host's own namespace: the addresses exist only inside these
# namespaces, and every namespace (with its links) is removed at the end. Each stream's reconnects go to the next
# agent in turn (WiFi through one node, LTE through another); the agents apply one shared timeline (disconnects every
# few seconds, then one herd disconnect of everything); the pair goes quiet for the run's last seconds; `chaos report
# --merge` joins the agents' events, and the merged report is compared with the pair's own logs, stream by stream.
#
#   Tests/fleet/netns-fleet.sh CHAOS OUT [STREAMS] [SECONDS] [AGENTS]
#
# Environment: RATE (messages per second each way on each stream, default 0.5), HEARTBEAT (default 1s; the timeout is
# three of them), DISCONNECT_EVERY and DISCONNECT_SHARE (the disconnect fault's `every` and `targets`, default 5s..9s
# and 30%), BACKOFF_CAP (the clients' reconnect backoff cap, default 2s; a herd of tens of thousands needs tens of
# seconds to spread over), PATHS (how many agents each stream's reconnects take turns over, default all of them; 2 is a
# phone's WiFi and LTE: group k's streams go through agents k and k+1), HERD_AT (the herd disconnect, default at two
# thirds of the run), WARM_AT (when warm-up is over for the RSS and descriptor figures, default a fifth), AGENT_FDS (each agent's descriptor limit, default 20000), PER_SERVER (streams per server, default
# 5000). No process may open more descriptors than the machine's limit (20,000 here), so the streams are split into
# groups of PER_SERVER: group k has its own server process (port 7000+k in the server namespace) and its own phone
# process (a log file and a socket per stream), and every agent runs one proxy per group (edge-k, port 9000+k, to
# server k), so a stream reaches its own server through whichever agent it reconnects through.
#
# Prints, per agent, its RSS and open descriptors sampled over the run (agents.tsv keeps every sample), then one JSON
# line last: streams, matching, lost, duplicated, the merge's verdict, seconds and peak RSS, each agent's RSS and
# descriptors after warm-up and at the end. Exit 0 when the merged report equals the logs (duplicated 0, and every seq it
# counts lost one its producer logged unacknowledged as it stopped and its consumer never processed); 77
# when namespaces are unavailable.
set -euo pipefail
CHAOS=$(readlink -f "$1"); OUT=$2; STREAMS=${3:-300}; SECONDS_RUN=${4:-20}; AGENTS=${5:-3}
[ "$AGENTS" -ge 1 ] && [ "$AGENTS" -le 150 ] || { echo "netns-fleet: AGENTS must be 1 to 150, found $AGENTS" >&2; exit 2; }
RATE=${RATE:-0.5}; HEARTBEAT=${HEARTBEAT:-1s}; AGENT_FDS=${AGENT_FDS:-20000}
DISCONNECT_EVERY=${DISCONNECT_EVERY:-5s..9s}; DISCONNECT_SHARE=${DISCONNECT_SHARE:-30%}; BACKOFF_CAP=${BACKOFF_CAP:-2s}
HEARTBEAT_TIMEOUT="$(( ${HEARTBEAT%s} * 3 ))s"
PATHS=${PATHS:-$AGENTS}; HERD_AT=${HERD_AT:-$(( SECONDS_RUN * 2 / 3 ))}; WARM_AT=${WARM_AT:-$(( SECONDS_RUN / 5 ))}
PER_SERVER=${PER_SERVER:-5000}
GROUPS_N=$(( (STREAMS + PER_SERVER - 1) / PER_SERVER ))
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
  echo "netns-fleet: network namespaces need root and iproute2 (ip netns): not run"; exit 77
fi
mkdir -p "$OUT"; OUT=$(readlink -f "$OUT")
TAG=$(printf '%04x' $((RANDOM % 65536)))
NET="10.$((RANDOM % 200 + 20)).$((RANDOM % 250))"
HUB="chf$TAG-hub"; SERVER="chf$TAG-srv"; PHONE="chf$TAG-ph"
HOSTS=("$SERVER" "$PHONE"); for i in $(seq 1 "$AGENTS"); do HOSTS+=("chf$TAG-a$i"); done
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for ns in "$HUB" "${HOSTS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 143' TERM  # a test's timeout: the EXIT trap still removes the namespaces
trap 'exit 130' INT

ip netns add "$HUB"
ip -n "$HUB" link add br0 type bridge
ip -n "$HUB" link set br0 up
ip -n "$HUB" link set lo up
# host index → address: server .10, phone .20, agent i .(101+i) (any number of agents up to 150)
address() { case $1 in 0) echo "$NET.10" ;; 1) echo "$NET.20" ;; *) echo "$NET.$(( 100 + $1 ))" ;; esac; }
for index in "${!HOSTS[@]}"; do
  ns=${HOSTS[$index]}; ip netns add "$ns"
  ip link add "v$TAG$index" type veth peer name "w$TAG$index"
  ip link set "v$TAG$index" netns "$ns"; ip link set "w$TAG$index" netns "$HUB"
  ip -n "$HUB" link set "w$TAG$index" master br0 up
  ip -n "$ns" addr add "$(address "$index")/24" dev "v$TAG$index"
  ip -n "$ns" link set "v$TAG$index" up; ip -n "$ns" link set lo up
  # Each namespace has its own TCP settings: room for tens of thousands of connections and a herd's SYNs.
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="1024 65535" net.core.somaxconn=65535 \
    net.ipv4.tcp_max_syn_backlog=65535 2>/dev/null || true
done
SERVER_IP=$(address 0)
# One scenario for every agent (they listen on the same ports in their own namespace): a proxy per group.
HERD=$HERD_AT
QUIET=$(( SECONDS_RUN / 20 > 5 ? SECONDS_RUN / 20 : 5 ))
# Disconnects before the herd and, when the run leaves room (a minute for the herd to reconnect, ten seconds before the
# quiet), after it too.
AFTER_HERD=""
if [ $(( SECONDS_RUN - QUIET - 10 - HERD - 60 )) -ge 30 ]; then
  AFTER_HERD="  - disconnect: {every: $DISCONNECT_EVERY, mode: reset, targets: $DISCONNECT_SHARE, after: $(( HERD + 60 ))s, until: $(( SECONDS_RUN - QUIET - 10 ))s}"
fi
cat > "$OUT/agent.yaml" <<YAML
name: netns-fleet
duration: ${SECONDS_RUN}s
seed: 11
proxies:
$(for k in $(seq 1 "$GROUPS_N"); do echo "  - {name: edge-$k, listen: \"0.0.0.0:$(( 9000 + k ))\", upstream: \"$SERVER_IP:$(( 7000 + k ))\"}"; done)
protocol:
  framing: lines
  seq: seq
  stream: stream
  ack: ack
  ignore: {type: [PING, PONG, HELLO, WELCOME, ACK, GAP]}
faults:
  - disconnect: {every: $DISCONNECT_EVERY, mode: reset, targets: $DISCONNECT_SHARE, until: $(( HERD - 2 ))s}
  - disconnect: {at: ${HERD}s, mode: reset}
$AFTER_HERD
expect:
  lost: 0
  duplicated: 0
YAML
"$CHAOS" validate "$OUT/agent.yaml" >/dev/null

# The pair produces until the run's last QUIET seconds (--send-until, one moment for every process: a length would count
# from each one's own start, late by however long a loaded machine took to start it), then only heartbeats and
# acknowledgements, so nothing is in flight when it stops: a message the audit counts as sent is then either read or
# lost, never cut off unread.
START=$(date -u -d "+6 seconds" +%Y-%m-%dT%H:%M:%SZ)
END_AT=$(( $(date -u -d "$START" +%s) + SECONDS_RUN ))
SEND_UNTIL=$(date -u -d "@$(( END_AT - QUIET ))" +%Y-%m-%dT%H:%M:%SZ)
SERVER_PIDS=()
for k in $(seq 1 "$GROUPS_N"); do
  ip netns exec "$SERVER" "$CHAOS" demo server --listen "$SERVER_IP:$(( 7000 + k ))" --rate "$RATE" --log "$OUT/server-$k.jsonl" \
    --heartbeat "$HEARTBEAT" --heartbeat-timeout "$HEARTBEAT_TIMEOUT" --send-until "$SEND_UNTIL" \
    > "$OUT/server-$k.out" 2>&1 & PIDS+=($!); SERVER_PIDS+=($!)
done
AGENT_PIDS=()
for i in $(seq 1 "$AGENTS"); do
  # --busy-poll 0: the agents share two cores with the pair, and polling after each relayed message would take them.
  ip netns exec "chf$TAG-a$i" prlimit --nofile="$AGENT_FDS" "$CHAOS" run "$OUT/agent.yaml" --agent "a$i" --start-at "$START" \
    --out "$OUT/a$i" --busy-poll 0 \
    > "$OUT/a$i.out" 2>&1 & PIDS+=($!); AGENT_PIDS+=($!)
done
mkdir -p "$OUT/phone"
sleep 5
PHONE_PIDS=()
for p in $(seq 1 "$GROUPS_N"); do
  count=$(( p < GROUPS_N ? PER_SERVER : STREAMS - (GROUPS_N - 1) * PER_SERVER ))
  # Group p's streams take turns over PATHS agents, from agent p on (host index of agent i: i + 1).
  CONNECT=()
  for j in $(seq 0 $(( PATHS - 1 ))); do
    agent=$(( (p - 1 + j) % AGENTS + 1 ))
    CONNECT+=("$([ "$j" = 0 ] && echo --connect || echo --also-connect)" "$(address $(( agent + 1 ))):$(( 9000 + p ))")
  done
  ip netns exec "$PHONE" "$CHAOS" demo client "${CONNECT[@]}" --stream "p$p" --streams "$count" --rate "$RATE" \
    --heartbeat "$HEARTBEAT" --heartbeat-timeout "$HEARTBEAT_TIMEOUT" --send-until "$SEND_UNTIL" \
    --backoff-base 200ms --backoff-cap "$BACKOFF_CAP" --log "$OUT/phone/p$p.jsonl" > "$OUT/phone-$p.out" 2>&1 & PIDS+=($!); PHONE_PIDS+=($!)
done
# The phones stop (SIGTERM: each stream sends FIN, reads what is still coming until the server closes, logs it) in the
# quiet, while the agents still relay.
STOP_AT=$(( END_AT - 2 ))
PHONES_STOPPED=0
# Each agent's RSS (kB) and open descriptors while it runs, sampled every SAMPLE seconds into agents.tsv.
SAMPLE=$(( SECONDS_RUN >= 120 ? 10 : 1 ))
printf 't_s\tagent\trss_kb\tfds\n' > "$OUT/agents.tsv"
BEGUN=$(date +%s)
TICK=0
while kill -0 "${AGENT_PIDS[0]}" 2>/dev/null; do
  if [ "$PHONES_STOPPED" = 0 ] && [ "$(date +%s)" -ge "$STOP_AT" ]; then
    for pid in "${PHONE_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    PHONES_STOPPED=1
  fi
  TICK=$(( TICK + 1 ))
  if [ $(( (TICK - 1) % SAMPLE )) != 0 ]; then sleep 1; continue; fi
  for i in "${!AGENT_PIDS[@]}"; do
    pid=${AGENT_PIDS[$i]}
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
    fds=$( (ls "/proc/$pid/fd" 2>/dev/null || true) | wc -l)
    [ -n "$rss" ] && printf '%s\ta%s\t%s\t%s\n' "$(( $(date +%s) - BEGUN ))" "$(( i + 1 ))" "$rss" "$fds" >> "$OUT/agents.tsv"
  done
  sleep 1
done
STATUS=0
for pid in "${AGENT_PIDS[@]}"; do wait "$pid" || true; done
# The pair stops before its logs are read: the phones (if the agents ended first), then the servers (each logs what it
# processed, then exits).
for pid in "${PHONE_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
for pid in "${PHONE_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
for pid in "${SERVER_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
for pid in "${SERVER_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
FOLDERS=(); for i in $(seq 1 "$AGENTS"); do FOLDERS+=("$OUT/a$i"); done
BEGIN=$(date +%s.%N)
# The merge's peak RSS (kB) from GNU time when the machine has it.
TIMED=(); [ -x /usr/bin/time ] && TIMED=(/usr/bin/time -f %M -o "$OUT/merge.rss")
"${TIMED[@]}" "$CHAOS" report --merge "${FOLDERS[@]}" --out "$OUT/merged" --format markdown > "$OUT/merged.md" 2> "$OUT/merge.err" || STATUS=$?
MERGE_S=$(awk -v end="$(date +%s.%N)" -v begin="$BEGIN" 'BEGIN { printf "%.3f", end - begin }')
MERGE_RSS=$(tail -n 1 "$OUT/merge.rss" 2>/dev/null | tr -dc 0-9); MERGE_RSS=${MERGE_RSS:-0}
python3 - "$OUT" "$STREAMS" "$STATUS" "$MERGE_S" "$MERGE_RSS" "chf$TAG-" "$WARM_AT" "$SECONDS_RUN" <<'PY'
import csv, glob, json, statistics, sys
out, streams, status, merge_s, merge_rss, prefix, warm_at, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6], int(sys.argv[7]), int(sys.argv[8])
# Each agent's RSS and descriptors while it relays after warm-up (from WARM_AT to the run's end, not while it writes
# its report): the first such sample, the median, the least and the most, and the last.
samples = {}
for row in csv.DictReader(open(out + "/agents.tsv"), delimiter="\t"):
    samples.setdefault(row["agent"], []).append((int(row["t_s"]), int(row["rss_kb"]), int(row["fds"])))
agents = {}
for name in sorted(samples, key=lambda a: int(a[1:])):
    rows = samples[name]
    warm = [r for r in rows if warm_at <= r[0] <= seconds - 2] or rows
    mb = lambda kb: round(kb / 1024, 1)
    a = agents[name] = {"rss_mb_warm": mb(warm[0][1]), "rss_mb_median": mb(statistics.median(r[1] for r in warm)),
                        "rss_mb_min": mb(min(r[1] for r in warm)), "rss_mb_max": mb(max(r[1] for r in warm)),
                        "rss_mb_end": mb(warm[-1][1]), "fds_warm": warm[0][2], "fds_min": min(r[2] for r in warm),
                        "fds_max": max(r[2] for r in warm), "fds_end": warm[-1][2]}
    print(f"agent {name}: RSS {a['rss_mb_warm']} MB after warm-up, median {a['rss_mb_median']}, {a['rss_mb_min']}-{a['rss_mb_max']}, "
          f"{a['rss_mb_end']} MB at the end; descriptors {a['fds_warm']}, {a['fds_min']}-{a['fds_max']}, {a['fds_end']} at the end "
          f"({len(warm)} samples from {warm[0][0]} s to {warm[-1][0]} s)")
peak = max((max(r[1] for r in rows) for rows in samples.values()), default=0)
seqs = {}
unacknowledged = {}  # the seqs each producer still held unacknowledged as it stopped
for path in glob.glob(out + "/phone/*.jsonl") + glob.glob(out + "/server-*.jsonl"):
    for line in open(path):
        o = json.loads(line)
        if "dir" not in o:
            continue
        key = (o["stream"], "upstream" if o["dir"] == "up" else "downstream")
        if "seq" in o:
            seqs.setdefault(key, set()).add(o["seq"])
        elif o.get("event") == "unacknowledged":
            unacknowledged.setdefault(key, set()).update(range(o["from"], o["to"] + 1))
report = json.load(open(out + "/merged/report.json"))
merged = {(s["stream"], s["direction"]): s for s in report["streams"]}
# Every stream and direction either side knows: one no message crossed in the run (a loaded machine's streams whose
# connections never lasted until the server's first message, as in s56h2: 5 of 600) matches when the audit's ok is 0
# too. The run must still carry most of them (three in four), or it judged too little.
keys = set(seqs) | set(merged)
# A stream matches when the consumer's log holds the seqs the audit counted ok, and at most those it counted
# unconfirmed besides (taken by the consumer's TCP just before a reset, past its last ack: read or not, only its log can
# say; a loaded machine's run, s62q1, had 37 such streams, each log one seq past the audit's ok).
def matches(key):
    stream = merged.get(key)
    if stream is None:
        return False
    ok, logged = stream["ok"], len(seqs.get(key, ()))
    return ok <= logged <= ok + stream.get("unconfirmed", 0)
# A loaded machine's pair may end with messages it never delivered (a stream whose connections kept timing out at the
# end: CI of 0b860be5 lost 69). Each seq the audit counts lost must then be one its producer still held unacknowledged
# as it stopped and its consumer never processed: the pair's own account of what it did not deliver.
undelivered = lambda key: unacknowledged.get(key, set()) - seqs.get(key, set())
unexplained = sum(max(0, s["lost"] - len(undelivered((s["stream"], s["direction"])))) for s in report["streams"])
for anomaly in report["anomalies"]:
    if anomaly["class"] == "lost" and not set(range(anomaly["from_seq"], anomaly["to_seq"] + 1)) <= undelivered(
            (anomaly["stream"], anomaly["direction"])):
        unexplained += 1
matching = sum(1 for key in keys if matches(key))
mismatches = [(k, merged.get(k, {}).get("ok"), merged.get(k, {}).get("unconfirmed"), len(seqs.get(k, ())))
              for k in sorted(keys) if not matches(k)][:5]
totals = report["totals"]
# The evidence for the first mismatches, before the summary (a CI run's folder is gone once it ends): what the consumer
# processed and when, what its producer held unacknowledged at its stop, the stream's connection events in the phone's
# log, and the audit's anomalies for it.
for key in [m[0] for m in mismatches[:2]]:
    name, direction = key
    stream = merged.get(key, {})
    lines = []
    for path in glob.glob(out + "/phone/*.jsonl") + glob.glob(out + "/server-*.jsonl"):
        side = "phone" if "/phone/" in path else "server"
        for line in open(path):
            o = json.loads(line)
            if o.get("stream") == name and ("dir" not in o or o["dir"] == ("up" if direction == "upstream" else "down")):
                lines.append((o.get("t", 0), side, {k: v for k, v in o.items() if k not in ("t", "stream")}))
    print(f"evidence {name} {direction}: audit ok {stream.get('ok')} lost {stream.get('lost')} unconfirmed {stream.get('unconfirmed')}; "
          f"consumer logged {sorted(seqs.get(key, ()))}; producer unacknowledged at its stop {sorted(unacknowledged.get(key, ()))}")
    for t, side, o in sorted(lines, key=lambda l: l[0])[-40:]:
        print(f"  {t} {side} {json.dumps(o)}")
    for anomaly in report["anomalies"]:
        if anomaly.get("stream") == name and anomaly.get("direction") == direction:
            print(f"  anomaly {json.dumps(anomaly)}")
print(json.dumps({"streams": streams, "logged": len(seqs), "matching": matching, "mismatches": mismatches,
                  "lost": totals["lost"], "unexplained_lost": unexplained, "duplicated": totals["duplicated"], "ok": totals["ok"],
                  "connections": report["connections"]["opened"], "verdict": report["verdict"], "merge_exit": status,
                  "merge_s": round(merge_s, 2), "merge_rss_mb": round(merge_rss / 1024, 1), "agent_peak_rss_kb": peak,
                  "agents": agents, "namespaces": prefix}))
# The merge fails (exit 1) on a loss the pair's own logs account for; any other failure, or a loss they do not, fails.
judged = status == 0 or (status == 1 and totals["lost"] > 0 and totals["duplicated"] == 0 and unexplained == 0)
sys.exit(0 if judged and matching == len(keys) == len(merged) == 2 * streams and len(seqs) >= 0.75 * 2 * streams else 1)
PY
