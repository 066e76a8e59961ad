#!/usr/bin/env bash
# Checks .github/actions/chaos/action.yml without GitHub: it parses as YAML; it is a composite action with the
# inputs scenario (required), duration, seed, expect (default pass), version (default latest), comment (default
# true); every run step names its shell and keeps ${{ }} out of its script (inputs reach scripts through env);
# every run script passes shellcheck (when shellcheck is installed); actionlint passes on a workflow that uses
# the action with every input (when actionlint is installed).
set -euo pipefail
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
echo "check-action: OK"
