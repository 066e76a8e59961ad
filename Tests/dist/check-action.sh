#!/usr/bin/env bash
# Checks .github/actions/chaos/action.yml without GitHub: it parses as YAML; it is a composite action with the
# inputs scenario (required), duration, seed, expect (default pass), version (default latest), comment (default
# true); every run step names its shell and keeps ${{ }} out of its script (inputs reach scripts through env);
# every run script passes shellcheck (when shellcheck is installed); actionlint passes on a workflow that uses
# the action with every input (when actionlint is installed).
# With a release tarball (Tests/dist/check-action.sh dist/chaos-<version>-linux-<arch>.tar.gz), it also runs the
# action's steps here as a runner would (Tests/dist/run-action-locally.py: a stub gh serves the tarball as the
# release): a passing scenario with expect pass, a failing one (the naive client) with expect fail, and the failing
# one with expect pass, which must fail the action.
set -euo pipefail
tarball=""
if [ $# -ge 1 ]; then tarball=$(realpath "$1"); fi
cd "$(dirname "$0")/../.."
action=.github/actions/chaos/action.yml
fail() { echo "check-action: FAIL: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$action" "$work" <<'PY'
import os, sys
import yaml

path, work = sys.argv[1:3]
def die(message):
    sys.exit(f"check-action: FAIL: {message}")
with open(path) as handle:
    action = yaml.safe_load(handle)
inputs = action.get("inputs") or die("no inputs")
for name, required, default in [("scenario", True, None), ("duration", False, ""), ("seed", False, ""),
                                ("expect", False, "pass"), ("version", False, "latest"), ("comment", False, "true")]:
    spec = inputs.get(name) or die(f"no input {name}")
    if bool(spec.get("required", False)) != required:
        die(f"input {name}: required should be {required}")
    if default is not None and str(spec.get("default")) != default:
        die(f"input {name}: default {spec.get('default')!r}, expected {default!r}")
runs = action.get("runs") or die("no runs")
if runs.get("using") != "composite":
    die("runs.using is not composite")
uses = []
for number, step in enumerate(runs.get("steps") or die("no steps"), 1):
    if "run" in step:
        if "shell" not in step:
            die(f"step {number} ({step.get('name')}): a composite run step needs shell")
        if "${{" in step["run"]:
            die(f"step {number} ({step.get('name')}): ${{{{ }}}} in the script (pass it through env)")
        with open(os.path.join(work, f"step{number}.sh"), "w") as out:
            out.write(f"#!/usr/bin/env {step['shell']}\n# {step.get('name')}\n{step['run']}")
    else:
        uses.append(step.get("uses"))
if "actions/upload-artifact@v4" not in uses:
    die("no actions/upload-artifact@v4 step")
print(f"check-action: {path} parses: composite, {len(runs['steps'])} steps, inputs {', '.join(inputs)}")
PY

if command -v shellcheck >/dev/null 2>&1; then
  shellcheck -s bash "$work"/step*.sh || fail "shellcheck found problems in the run steps (above)"
  echo "check-action: shellcheck: $(find "$work" -maxdepth 1 -name "step*.sh" | wc -l) run scripts OK"
else
  echo "check-action: shellcheck not installed, run scripts not linted"
fi

if command -v actionlint >/dev/null 2>&1; then
  mkdir -p "$work/repo/.github/workflows" "$work/repo/.github/actions"
  cp -R .github/actions/chaos "$work/repo/.github/actions/"
  cat > "$work/repo/.github/workflows/chaos.yml" <<'YAML'
name: chaos
on: [pull_request]
permissions:
  contents: read
  pull-requests: write
jobs:
  chaos:
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v4
      - id: chaos
        uses: ./.github/actions/chaos
        with:
          scenario: Scenarios/quickstart.yaml
          duration: 60s
          seed: "42"
          expect: pass
          version: latest
          comment: "true"
          repository: chaos-harness/chaos
      - run: echo "verdict ${{ steps.chaos.outputs.verdict }}, exit ${{ steps.chaos.outputs.exit-code }}"
YAML
  (cd "$work/repo" && git init -q . && actionlint) || fail "actionlint found problems (above)"
  echo "check-action: actionlint $(actionlint --version | head -n 1): a workflow using the action with every input OK"
else
  echo "check-action: actionlint not installed, not run"
fi
if [ -n "$tarball" ]; then
  workspace="$work/workspace"
  mkdir -p "$workspace"
  free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
  for kind in resilient naive; do
    listen=$(free_port); upstream=$(free_port)
    while [ "$upstream" = "$listen" ]; do upstream=$(free_port); done
    if [ "$kind" = naive ]; then client_flags="--naive"; else client_flags="--state {run_dir}/client-{index}.state"; fi
    cat > "$workspace/$kind.yaml" <<YAML
name: action-$kind
duration: 5s
seed: 3
proxies:
  - {name: stream, listen: "127.0.0.1:$listen", upstream: "127.0.0.1:$upstream"}
pair:
  server:
    run: chaos demo server --listen 127.0.0.1:{upstream.port} --rate 50 --log {run_dir}/server.jsonl
    ready: tcp 127.0.0.1:{upstream.port}
  client:
    run: chaos demo client $client_flags --connect 127.0.0.1:{listen.port} --stream c{index} --rate 50 --log {run_dir}/client-{index}.jsonl
    count: 1
protocol: {framing: lines, format: json, seq: seq, stream: stream, id: id, ack: ack, ignore: {type: [PING, PONG, HELLO, WELCOME, ACK, GAP]}}
faults:
  - latency:    {at: 1s, for: 1s, add: 300ms, direction: both}
  - disconnect: {at: 1500ms, mode: reset}
  - disconnect: {at: 3s, mode: reset}
expect: {lost: 0, duplicated: 0}
YAML
  done
  run_case() { # scenario expect -> prints the JSON line
    rm -rf "$workspace/chaos-report"
    python3 Tests/dist/run-action-locally.py "$tarball" "$workspace" "$1" "$2" 2>"$work/case.log" | tail -n 1
  }
  check_case() { # description json python-condition
    python3 -c 'import json, sys; r = json.loads(sys.argv[1]); sys.exit(0 if eval(sys.argv[2]) else 1)' "$2" "$3" ||
      { cat "$work/case.log" >&2; fail "$1: $2"; }
    echo "check-action: locally: $1: $(python3 -c 'import json, sys; r = json.loads(sys.argv[1]); print("job", r["job"], "| verdict", r["outputs"]["verdict"], "| exit", r["outputs"]["exit-code"], "| comment", r["comment"], "| artifact", r["artifact"], "| bundle", r["bundle"], "|", r["summary"][:90])' "$2")"
  }
  result=$(run_case resilient.yaml pass)
  check_case "resilient pair, expect pass" "$result" \
    'r["job"] == "success" and r["outputs"]["verdict"] == "pass" and r["comment"] and r["artifact"] and not r["bundle"] and "PASS" in r["summary"]'
  result=$(run_case naive.yaml fail)
  check_case "naive client, expect fail" "$result" \
    'r["job"] == "success" and r["outputs"]["verdict"] == "fail" and r["outputs"]["exit-code"] == "1" and r["artifact"] and r["bundle"]'
  result=$(run_case naive.yaml pass)
  check_case "naive client, expect pass (must fail the action)" "$result" \
    'r["job"] == "failure" and r["steps"].get("verdict") == "failure" and r["outputs"]["verdict"] == "fail" and r["artifact"]'
fi
echo "check-action: OK"
