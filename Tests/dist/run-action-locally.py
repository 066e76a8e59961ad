#!/usr/bin/env python3
"""Runs the composite action .github/actions/chaos/action.yml here, the way a GitHub runner would, without GitHub.

    python3 Tests/dist/run-action-locally.py TARBALL WORKSPACE SCENARIO EXPECT [--event pull_request]

Each step's env and `if:` are evaluated from the inputs, the github context and the earlier steps' outputs
(the expression forms this action uses: inputs.*, steps.*.outputs.*, steps.*.outcome, github.*, always(), ==, !=,
&&, ||); run steps run as GitHub runs them (bash --noprofile --norc -eo pipefail) with RUNNER_TEMP, GITHUB_OUTPUT,
GITHUB_PATH, GITHUB_STEP_SUMMARY, RUNNER_OS and RUNNER_ARCH; `gh` is a stub that serves TARBALL (and its .sha256)
as the release's assets and keeps `gh pr comment`'s body; actions/upload-artifact copies the path.
Prints one JSON line: {"job": "success"|"failure", "steps": {...}, "outputs": {...}, "summary": ..., "comment": ...}.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ACTION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".github", "actions", "chaos", "action.yml")

GH_STUB = r"""#!/usr/bin/env bash
# gh, as far as the action uses it: release download (from $STUB_RELEASE) and pr comment (kept in $STUB_COMMENT).
set -euo pipefail
case "$1 $2" in
  "release download")
    shift 2; dir=.; patterns=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --dir) dir=$2; shift 2 ;;
        --pattern) patterns+=("$2"); shift 2 ;;
        --repo) echo "gh stub: release of $2" >&2; shift 2 ;;
        *) echo "gh stub: tag $1" >&2; shift ;;
      esac
    done
    for f in "$STUB_RELEASE"/*; do
      for p in "${patterns[@]}"; do
        # shellcheck disable=SC2053
        [[ "$(basename "$f")" == $p ]] && cp "$f" "$dir/"
      done
    done; true ;;
  "pr comment")
    number=$3; shift 3
    while [ $# -gt 0 ]; do case "$1" in --body-file) cp "$2" "$STUB_COMMENT"; shift 2 ;; *) shift ;; esac; done
    echo "gh stub: commented on #$number" >&2 ;;
  *) echo "gh stub: unsupported: $*" >&2; exit 1 ;;
esac
"""


def main():
    tarball, workspace, scenario, expect = sys.argv[1:5]
    event = sys.argv[sys.argv.index("--event") + 1] if "--event" in sys.argv else "pull_request"
    with open(ACTION) as handle:
        action = yaml.safe_load(handle)

    temp = tempfile.mkdtemp(prefix="chaos-action-")
    release, stubs, runner_temp = (os.path.join(temp, d) for d in ("release", "stubs", "runner-temp"))
    for d in (release, stubs, runner_temp):
        os.makedirs(d)
    shutil.copy(tarball, release)
    if os.path.exists(tarball + ".sha256"):
        shutil.copy(tarball + ".sha256", release)
    with open(os.path.join(stubs, "gh"), "w") as handle:
        handle.write(GH_STUB)
    os.chmod(os.path.join(stubs, "gh"), 0o755)
    files = {name: os.path.join(temp, name) for name in ("summary.md", "path", "comment.md")}
    open(files["summary.md"], "w").close()
    open(files["path"], "w").close()

    given = {"scenario": scenario, "expect": expect, "duration": "", "seed": ""}
    inputs = {}
    for name, spec in action["inputs"].items():
        inputs[name] = given.get(name, str(spec.get("default", "")))
    github = {"token": "stub-token", "action_repository": "", "event_name": event, "repository": "chaos-harness/chaos",
              "event": {"pull_request": {"number": 7}} if event.startswith("pull_request") else {}}
    steps = {}
    job_failed = False
    path_additions = []

    def lookup(name):
        parts = name.split(".")
        if parts[0] == "inputs":
            return inputs.get(parts[1], "")
        if parts[0] == "steps":
            step = steps.get(parts[1], {})
            return step.get("outputs", {}).get(parts[3], "") if parts[2] == "outputs" else step.get(parts[2], "")
        if parts[0] == "github":
            value = github
            for part in parts[1:]:
                value = value.get(part, "") if isinstance(value, dict) else ""
            return value
        raise ValueError(f"unsupported context {name}")

    def evaluate(expression):
        text = expression.strip()
        if text.startswith("${{") and text.endswith("}}"):
            text = text[3:-2]
        python = re.sub(r"\balways\(\)", "True", text)
        python = re.sub(r"\bsuccess\(\)", "(not job_failed)", python)
        python = python.replace("&&", " and ").replace("||", " or ")
        python = re.sub(r"(?<!['\w.])((?:inputs|steps|github)(?:\.[\w-]+)+)", lambda m: f"lookup({m.group(1)!r})", python)
        return eval(python, {"lookup": lookup, "job_failed": job_failed, "True": True})

    def substitute(value):
        return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", lambda m: str(evaluate(m.group(1))), str(value))

    for index, step in enumerate(action["runs"]["steps"]):
        step_id = step.get("id", f"_{index}")
        condition = step.get("if")
        run_it = evaluate(condition) if condition else not job_failed
        if not run_it:
            steps[step_id] = {"outcome": "skipped", "outputs": {}}
            continue
        if "uses" in step:
            with_ = {k: substitute(v) for k, v in (step.get("with") or {}).items()}
            if step["uses"].startswith("actions/upload-artifact@"):
                source = os.path.join(workspace, with_["path"])
                if os.path.isdir(source):
                    shutil.copytree(source, os.path.join(temp, "artifact", with_["name"]))
                elif os.path.isfile(source):
                    os.makedirs(os.path.join(temp, "artifact", with_["name"]), exist_ok=True)
                    shutil.copy(source, os.path.join(temp, "artifact", with_["name"]))
                steps[step_id] = {"outcome": "success", "outputs": {}}
                continue
            raise SystemExit(f"unsupported uses: {step['uses']}")
        output_file = os.path.join(temp, f"output-{index}")
        open(output_file, "w").close()
        env = {
            "PATH": os.pathsep.join([stubs] + path_additions + [os.environ["PATH"]]),
            "HOME": os.environ.get("HOME", "/root"),
            "RUNNER_TEMP": runner_temp, "RUNNER_OS": "Linux",
            "RUNNER_ARCH": {"x86_64": "X64", "aarch64": "ARM64"}.get(os.uname().machine, os.uname().machine),
            "GITHUB_OUTPUT": output_file, "GITHUB_PATH": files["path"], "GITHUB_STEP_SUMMARY": files["summary.md"],
            "GITHUB_REPOSITORY": github["repository"], "GITHUB_API_URL": "https://api.github.invalid",
            "GITHUB_ACTION_PATH": "/home/runner/work/_actions/chaos-harness/chaos/v1/.github/actions/chaos",
            "GITHUB_WORKSPACE": workspace, "STUB_RELEASE": release, "STUB_COMMENT": files["comment.md"],
        }
        env.update({k: substitute(v) for k, v in (step.get("env") or {}).items()})
        script = os.path.join(temp, f"step-{index}.sh")
        with open(script, "w") as handle:
            handle.write(step["run"])
        result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", script], cwd=workspace, env=env)
        outputs = {}
        with open(output_file) as handle:
            for line in handle:
                if "=" in line:
                    key, value = line.rstrip("\n").split("=", 1)
                    outputs[key] = value
        with open(files["path"]) as handle:
            path_additions = [line.strip() for line in handle if line.strip()]
        outcome = "success" if result.returncode == 0 else "failure"
        print(f"run-action-locally: step {step.get('name')!r}: {outcome}", file=sys.stderr)
        steps[step_id] = {"outcome": outcome, "outputs": outputs}
        if outcome == "failure":
            job_failed = True

    outputs = {name: substitute(spec["value"]) for name, spec in action.get("outputs", {}).items()}
    with open(files["summary.md"]) as handle:
        summary = handle.read()
    comment = open(files["comment.md"]).read() if os.path.exists(files["comment.md"]) else None
    artifact = os.path.isfile(os.path.join(temp, "artifact", inputs["artifact-name"], "report.json"))
    bundles = os.path.join(temp, "artifact", inputs["bundle-name"])
    bundle = os.path.isdir(bundles) and any(name.endswith(".tar.gz") for name in os.listdir(bundles))
    print(json.dumps({"job": "failure" if job_failed else "success",
                      "steps": {k: v["outcome"] for k, v in steps.items()}, "outputs": outputs,
                      "summary": summary.splitlines()[0] if summary else "", "comment": comment is not None,
                      "artifact": artifact, "bundle": bundle, "path": path_additions}))
    shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    main()
