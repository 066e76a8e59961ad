#!/usr/bin/env bash
# Renders deploy/kubernetes/{sidecar,fleet,merge-job} with kustomize, validates them against the
# Kubernetes schemas (kubernetes-validate --strict, pinned version) and checks chaos's conventions.
# Then proves it can fail: broken manifests must be rejected.
set -euo pipefail
cd "$(dirname "$0")/../.."

K8S_VERSION=1.30.0                     # schema version, pinned so results do not drift
VALIDATOR='kubernetes-validate==1.37.0' # ships the schemas of Kubernetes 1.25 to 1.37
OVERLAYS=(sidecar fleet merge-job)

fail() { echo "check-manifests: $*" >&2; exit 1; }

# kubectl with kustomize v5 (the manifests use `labels:` and directory resources).
if ! command -v kubectl >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || fail "kubectl is missing; install kubectl >= 1.27 (kustomize v5), or run as root to apt-get it"
  echo "kubectl is missing: apt-get install -y kubernetes-client" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y kubernetes-client >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 && apt-get install -y kubernetes-client >/dev/null; } ||
    fail "cannot install kubernetes-client"
fi
kustomize_major=$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p')
[ "${kustomize_major:-0}" -ge 5 ] ||
  fail "$(command -v kubectl) embeds kustomize older than v5 (Debian 12's kubernetes-client is 1.20); install kubectl >= 1.27"

# kubernetes-validate from PyPI (Debian's pip may want --break-system-packages).
if ! python3 -c 'import kubernetes_validate' 2>/dev/null; then
  echo "installing $VALIDATOR" >&2
  python3 -m pip install --quiet "$VALIDATOR" ||
    python3 -m pip install --quiet --break-system-packages "$VALIDATOR" ||
    fail "cannot install $VALIDATOR with python3 -m pip"
fi
validate() { python3 -m kubernetes_validate --strict -k "$K8S_VERSION" --quiet "$@"; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. Render and validate each overlay.
for o in "${OVERLAYS[@]}"; do
  kubectl kustomize "deploy/kubernetes/$o" >"$tmp/$o.yaml" 2>"$tmp/$o.log" ||
    { cat "$tmp/$o.log" >&2; fail "$o: kubectl kustomize failed"; }
  validate "$tmp/$o.yaml" >"$tmp/$o.log" 2>&1 ||
    { cat "$tmp/$o.log" >&2; fail "$o: not valid for Kubernetes $K8S_VERSION"; }
  [ -s "$tmp/$o.log" ] && sed "s/^/$o: /" "$tmp/$o.log" >&2   # warnings, if any
  n=$(python3 -c 'import sys, yaml; print(sum(1 for d in yaml.safe_load_all(open(sys.argv[1])) if d))' "$tmp/$o.yaml")
  [ "$n" -gt 0 ] || fail "$o: rendered no objects"
  echo "$o: $n objects valid"
done

# 2. chaos's conventions on the rendered objects.
read -r -d '' CONVENTIONS <<'EOF' || true
import json, sys, yaml
IMAGE = "ghcr.io/chaos-harness/chaos:latest"
UPSTREAM = {"sidecar": "127.0.0.1:8080", "fleet": "app-service:8080"}
errors, agents = [], 0
def need(ok, where, what):
    if not ok: errors.append(f"{where}: {what}")
def flag(args, name):
    return args[args.index(name) + 1] if name in args[:-1] else None
for pair in sys.argv[1:]:
    o, path = pair.split("=", 1)
    objs = [d for d in yaml.safe_load_all(open(path)) if d]
    named = {(d["kind"], d["metadata"]["name"]): d for d in objs}
    for (kind, name), d in named.items():
        if kind == "ConfigMap" and name.startswith("chaos-scenario"):
            s = yaml.safe_load(d["data"]["scenario.yaml"])
            p = s["proxies"][0]
            need(p["listen"] == "0.0.0.0:9000", f"{o} {kind}/{name}", "proxy must listen on 0.0.0.0:9000")
            need(p["upstream"] == UPSTREAM.get(o), f"{o} {kind}/{name}", f"upstream must be {UPSTREAM.get(o)}")
            need("protocol" in s and "expect" in s and s.get("faults"), f"{o} {kind}/{name}", "needs protocol, faults, expect")
        if kind not in ("Deployment", "Job"):
            continue
        tpl = d["spec"]["template"]
        pod, ann = tpl["spec"], tpl["metadata"].get("annotations", {})
        vols = {v["name"]: v for v in pod.get("volumes", [])}
        need(pod.get("securityContext", {}).get("runAsNonRoot") is True, f"{o} {kind}/{name}", "pod runAsNonRoot")
        for c in pod["containers"]:
            if not c["image"].startswith("ghcr.io/chaos-harness/chaos"):
                continue
            w = f"{o} {kind}/{name} container {c['name']}"
            sc = c.get("securityContext", {})
            need(c["image"] == IMAGE, w, f"image {c['image']} is not {IMAGE}")
            need(sc.get("runAsNonRoot") is True, w, "securityContext.runAsNonRoot")
            need(sc.get("readOnlyRootFilesystem") is True, w, "securityContext.readOnlyRootFilesystem")
            need(sc.get("allowPrivilegeEscalation") is False, w, "securityContext.allowPrivilegeEscalation false")
            need("ALL" in sc.get("capabilities", {}).get("drop", []), w, "capabilities drop ALL")
            mounts = {m["mountPath"]: vols.get(m["name"], {}) for m in c.get("volumeMounts", [])}
            if kind == "Job":
                need("chaos report --merge" in " ".join(c.get("command", [])), w, "runs chaos report --merge")
                claim = mounts.get("/reports", {}).get("persistentVolumeClaim", {}).get("claimName")
                need(claim == "chaos-reports", w, "mounts claim chaos-reports at /reports")
                need(d["spec"].get("backoffLimit") is not None and d["spec"].get("ttlSecondsAfterFinished"), w, "backoffLimit and ttlSecondsAfterFinished")
                continue
            args = c.get("args", [])
            if args[:1] != ["run"]:
                continue
            agents += 1
            need(args[1:2] == ["/etc/chaos/scenario.yaml"], w, "runs /etc/chaos/scenario.yaml")
            for f, v in [("--agent", "$(POD_NAME)"), ("--metrics", "0.0.0.0:8474"),
                         ("--api-token-file", "/var/run/secrets/chaos/token"), ("--out", "/reports/$(POD_NAME)")]:
                need(flag(args, f) == v, w, f"{f} {v}")
            need("--metrics-open" in args, w, "--metrics-open")
            env = {e["name"]: e for e in c.get("env", [])}
            need(env.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name",
                 w, "POD_NAME from the downward API (metadata.name)")
            secret = mounts.get("/var/run/secrets/chaos", {}).get("secret", {}).get("secretName", "")
            need(secret.startswith("chaos-api-token") and ("Secret", secret) in named, w, "token Secret mounted at /var/run/secrets/chaos")
            cm = mounts.get("/etc/chaos", {}).get("configMap", {}).get("name", "")
            need(cm.startswith("chaos-scenario") and ("ConfigMap", cm) in named, w, "scenario ConfigMap mounted at /etc/chaos")
            ports = {p["containerPort"]: p.get("name") for p in c.get("ports", [])}
            need(ports.get(8474) == "api" and 9000 in ports, w, "ports 9000 and 8474 (named api)")
            for probe in ("readinessProbe", "livenessProbe"):
                get = c.get(probe, {}).get("httpGet", {})
                need(get.get("path") == "/metrics" and get.get("port") in ("api", 8474), w, f"{probe} on GET /metrics :8474")
            need("limits" in c.get("resources", {}) and "requests" in c.get("resources", {}), w, "resources requests and limits")
            need(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == "8474"
                 and ann.get("prometheus.io/path") == "/metrics", w, "prometheus.io scrape/port/path annotations")
            if o == "fleet":
                need(d["spec"].get("replicas") == 3, w, "replicas: 3")
                start = env.get("CHAOS_START_AT", {}).get("valueFrom", {}).get("configMapKeyRef", {})
                need(flag(args, "--start-at") == "$(CHAOS_START_AT)" and start.get("key") == "start-at"
                     and ("ConfigMap", start.get("name", "")) in named, w, "--start-at from the chaos-fleet ConfigMap's start-at")
                need(c.get("startupProbe", {}).get("httpGet", {}).get("path") == "/metrics"
                     and c["startupProbe"].get("periodSeconds", 10) * c["startupProbe"].get("failureThreshold", 3) >= 600,
                     w, "a startup probe that waits at least 10 minutes for --start-at")
                claim = mounts.get("/reports", {}).get("persistentVolumeClaim", {}).get("claimName")
                pvc = named.get(("PersistentVolumeClaim", claim or ""), {})
                need("ReadWriteMany" in pvc.get("spec", {}).get("accessModes", []), w, "/reports on a ReadWriteMany claim")
    if o == "fleet":
        # The Grafana dashboard for Grafana's sidecar: labelled grafana_dashboard "1", deploy/grafana/chaos-fleet.json as is.
        boards = [d for (k, _), d in named.items() if k == "ConfigMap" and d["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
        need(len(boards) == 1, o, "one ConfigMap labelled grafana_dashboard: \"1\" (the Grafana sidecar's label)")
        for d in boards:
            need(json.loads(d["data"].get("chaos-fleet.json", "null")) == json.load(open("deploy/grafana/chaos-fleet.json")),
                 f"{o} ConfigMap/{d['metadata']['name']}", "data chaos-fleet.json is deploy/grafana/chaos-fleet.json")
    if o in ("sidecar", "fleet"):
        need(any(k == "Service" and 9000 in [p["port"] for p in d["spec"]["ports"]] for (k, _), d in named.items()),
             o, "a Service on port 9000 for clients")
need(agents >= 2, "all", f"expected the sidecar and fleet agents, found {agents} agent containers")
for e in errors:
    print(e, file=sys.stderr)
if errors:
    sys.exit(1)
print(f"conventions: {agents} agent containers hardened, token mounted, --agent set, probes and scrape annotations present, "
      "the fleet's Grafana dashboard ConfigMap labelled for the sidecar")
EOF
rendered=()
for o in "${OVERLAYS[@]}"; do rendered+=("$o=$tmp/$o.yaml"); done
python3 -c "$CONVENTIONS" "${rendered[@]}" || fail "conventions failed (lines above name the overlay)"
diff <(grep -v '^    upstream:' deploy/kubernetes/base/scenario.yaml) \
     <(grep -v '^    upstream:' deploy/kubernetes/sidecar/scenario.yaml) >&2 ||
  fail "sidecar: scenario.yaml differs from base/scenario.yaml beyond its upstream"

# 3. Self-checks: the schema check and the convention check each reject a broken copy.
mkdir "$tmp/broken"
cat >"$tmp/broken/kustomization.yaml" <<'EOF'
resources: [deployment.yaml]
EOF
broken_deployment() {  # $1: replicas, $2: the container's securityContext line
  cat >"$tmp/broken/deployment.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: broken}
spec:
  replicas: $1
  selector: {matchLabels: {app: broken}}
  template:
    metadata: {labels: {app: broken}}
    spec:
      containers:
        - name: c
          image: busybox
          securityContext: {$2}
EOF
  kubectl kustomize "$tmp/broken" >"$tmp/broken.yaml"
}
broken_deployment 3 "readOnlyRootFilesystem: true"
validate "$tmp/broken.yaml" >/dev/null 2>&1 || fail "self-check: a valid Deployment was rejected"
broken_deployment '"three"' "readOnlyRootFilesystem: true"
! validate "$tmp/broken.yaml" >/dev/null 2>&1 || fail "self-check: replicas: \"three\" was accepted"
broken_deployment 3 "readOnlyRootFS: true"
! validate "$tmp/broken.yaml" >/dev/null 2>&1 || fail "self-check: an unknown field was accepted (not strict)"
for mutation in '/readOnlyRootFilesystem/d' '/prometheus.io\/scrape/d' 's/--agent/--agnet/' '/secretName/d'; do
  sed "$mutation" "$tmp/sidecar.yaml" >"$tmp/mutated.yaml"
  ! python3 -c "$CONVENTIONS" "sidecar=$tmp/mutated.yaml" "fleet=$tmp/fleet.yaml" "merge-job=$tmp/merge-job.yaml" 2>/dev/null ||
    fail "self-check: the convention check accepted sidecar with sed '$mutation'"
done
sed '/grafana_dashboard/d' "$tmp/fleet.yaml" >"$tmp/mutated.yaml"
! python3 -c "$CONVENTIONS" "sidecar=$tmp/sidecar.yaml" "fleet=$tmp/mutated.yaml" "merge-job=$tmp/merge-job.yaml" 2>/dev/null ||
  fail "self-check: the convention check accepted a fleet whose dashboard ConfigMap lost its grafana_dashboard label"
echo "self-check: replicas: \"three\", an unknown field, 4 broken sidecar copies and an unlabelled dashboard rejected"
