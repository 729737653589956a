#!/usr/bin/env bash
# Checks the deployment files without containers or a cluster, for CI:
#   - the Helm chart: helm lint --strict, helm template with the required
#     values and with every option on, and kubeconform -strict on what it
#     renders, against the oldest and newest Kubernetes the chart allows;
#   - packaging/compose/compose.yaml against the Compose Specification
#     schema, plus the references between its services.
# Exits non-zero on the first failure.
#
# Everything comes from package registries, since nothing else is reachable:
# helm and kubeconform are built from the Go module proxy; Kubernetes
# schemas come from the kubernetes-validate wheel (PyPI); the Compose schema
# and the ServiceMonitor CRD from the compose-go and prometheus-operator Go
# modules. All of it is cached under tests/.cache, so a second run builds
# nothing.
#
# For the tests: CHECK_DEPLOY_HELM_SET adds one --set to every helm call,
# CHECK_DEPLOY_COMPOSE replaces the compose file checked.
set -euo pipefail

HELM_VERSION=v3.22.0
KUBECONFORM_VERSION=v0.8.0
COMPOSE_GO_VERSION=v2.16.2      # v2.17 needs a newer Go than this machine's
PROMETHEUS_OPERATOR_VERSION=v0.85.0
KUBERNETES_VALIDATE_VERSION=1.37.0
JSONSCHEMA_VERSION=4.26.0
PYYAML_VERSION=6.0.3
# The chart's kubeVersion floor and the newest schemas kubernetes-validate has.
KUBE_VERSIONS="1.25.0 1.37.0"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=$ROOT/tests/.cache
CHART=$ROOT/packaging/helm/rutomq
CI_VALUES=$ROOT/packaging/helm/ci
COMPOSE_FILE=${CHECK_DEPLOY_COMPOSE:-$ROOT/packaging/compose/compose.yaml}
VENV=$CACHE/deploy-venv
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    PATH=/usr/local/go/bin:$PATH
fi

START=$EPOCHREALTIME
STEP_START=$START
STEP_NAME=
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }'; }
end_step() {
    [ -z "$STEP_NAME" ] || echo "[time] $STEP_NAME: $(since "$STEP_START")"
}
step() {
    end_step
    STEP_NAME=$1
    STEP_START=$EPOCHREALTIME
    echo "== $1"
}
fail() { echo "FAIL: $*" >&2; exit 1; }

helm_set=()
if [ -n "${CHECK_DEPLOY_HELM_SET:-}" ]; then
    helm_set=(--set "$CHECK_DEPLOY_HELM_SET")
fi

# A Go tool at a pinned version, built once into its own directory.
go_tool() {
    local name=$1 pkg=$2 version=$3 ldflags=${4:-}
    local dir=$CACHE/go-bin/$name@$version
    if [ -x "$dir/$name" ]; then
        echo "  $name $version: cached" >&2
    else
        echo "  $name $version: building from the Go module proxy" >&2
        mkdir -p "$dir"
        GOBIN=$dir CGO_ENABLED=0 go install -ldflags="$ldflags" "$pkg@$version" >&2
    fi
    echo "$dir/$name"
}

# A Go module's source directory (downloaded once into Go's module cache).
go_module_dir() {
    local json
    json=$(cd "$WORK" && go mod download -json "$1@$2") \
        || fail "go mod download $1@$2: $json"
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json"
}

step "tools"
HELM=$(go_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" \
    "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION")
KUBECONFORM=$(go_tool kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION" \
    "-X main.version=$KUBECONFORM_VERSION")
requirements="kubernetes-validate==$KUBERNETES_VALIDATE_VERSION jsonschema==$JSONSCHEMA_VERSION PyYAML==$PYYAML_VERSION"
# The venv is rebuilt when the pins or the Python it was made with change.
stamp="$requirements $(python3 -V 2>&1)"
if [ "$(cat "$VENV/.requirements" 2>/dev/null)" != "$stamp" ]; then
    echo "  venv: installing $requirements from PyPI"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install --quiet --disable-pip-version-check $requirements
    echo "$stamp" >"$VENV/.requirements"
else
    echo "  venv: cached ($requirements)"
fi
PY=$VENV/bin/python
K8S_SCHEMAS=$("$PY" -c 'import kubernetes_validate, os; print(os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema"))')
COMPOSE_SCHEMA=$(go_module_dir github.com/compose-spec/compose-go/v2 "$COMPOSE_GO_VERSION")/schema/compose-spec.json
SERVICEMONITOR_CRD=$(go_module_dir github.com/prometheus-operator/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION")/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
[ -f "$COMPOSE_SCHEMA" ] || fail "no Compose schema at $COMPOSE_SCHEMA"
[ -f "$SERVICEMONITOR_CRD" ] || fail "no ServiceMonitor CRD at $SERVICEMONITOR_CRD"
echo "  $("$HELM" version --short), kubeconform $("$KUBECONFORM" -v), compose-go $COMPOSE_GO_VERSION, prometheus-operator $PROMETHEUS_OPERATOR_VERSION, kubernetes-validate $KUBERNETES_VALIDATE_VERSION"

NEWEST=${KUBE_VERSIONS##* }

step "helm lint --strict"
for values in "" required.yaml all-options.yaml; do
    args=()
    [ -n "$values" ] && args=(-f "$CI_VALUES/$values")
    # Lint's own template pass ignores `fail`; helm template below does not.
    "$HELM" lint --strict --kube-version "$NEWEST" "$CHART" "${args[@]}" "${helm_set[@]}" \
        || fail "helm lint --strict ${values:-(chart defaults)}"
    echo "helm lint --strict ${values:-(chart defaults)}: ok"
done

step "helm template"
# The chart must refuse to render without the shared services it needs.
if out=$("$HELM" template rutomq "$CHART" --kube-version "$NEWEST" "${helm_set[@]}" 2>&1); then
    fail "helm template without postgresUrl and objectStore rendered; it must refuse"
fi
grep -q "objectStore is required" <<<"$out" || fail "helm template without values failed for another reason: $out"
echo "helm template (chart defaults alone): refused as expected: objectStore is required"
declare -A expected_kinds=(
    [required]="ConfigMap Deployment PodDisruptionBudget Secret Service ServiceAccount"
    [all-options]="ConfigMap Deployment HorizontalPodAutoscaler PodDisruptionBudget Service ServiceAccount ServiceMonitor"
)
for name in required all-options; do
    "$HELM" template rutomq "$CHART" --namespace streaming --kube-version "$NEWEST" \
        -f "$CI_VALUES/$name.yaml" "${helm_set[@]}" >"$WORK/$name.yaml" \
        || fail "helm template -f $name.yaml"
    kinds=$(sed -n 's/^kind: //p' "$WORK/$name.yaml" | sort | tr '\n' ' ' | sed 's/ $//')
    [ "$kinds" = "${expected_kinds[$name]}" ] \
        || fail "helm template -f $name.yaml rendered [$kinds], expected [${expected_kinds[$name]}]"
    # Stateless agents: nothing may claim storage that outlives a pod.
    if grep -qE 'persistentVolumeClaim|volumeClaimTemplates|hostPath' "$WORK/$name.yaml"; then
        fail "helm template -f $name.yaml asks for persistent storage"
    fi
    grep -q 'fieldPath: status.podIP' "$WORK/$name.yaml" || fail "$name: RUTOMQ_ADVERTISE is not the pod IP"
    echo "helm template -f $name.yaml: $(grep -c '^kind: ' "$WORK/$name.yaml") resources: $kinds"
done

step "kubeconform -strict"
"$PY" "$ROOT/packaging/check_deploy.py" k8s-schemas --src "$K8S_SCHEMAS" --out "$WORK/schemas" \
    --versions "${KUBE_VERSIONS// /,}" --crd "$SERVICEMONITOR_CRD" "$WORK"/required.yaml "$WORK"/all-options.yaml
for version in $KUBE_VERSIONS; do
    for name in required all-options; do
        echo "kubeconform -strict Kubernetes $version, $name.yaml:"
        # No -ignore-missing-schemas: a kind without a schema fails.
        "$KUBECONFORM" -strict -summary -verbose -kubernetes-version "$version" \
            -schema-location "$WORK/schemas" "$WORK/$name.yaml" \
            || fail "kubeconform $name.yaml against Kubernetes $version"
    done
done

step "compose"
"$PY" "$ROOT/packaging/check_deploy.py" compose --schema "$COMPOSE_SCHEMA" "$COMPOSE_FILE" \
    || fail "compose validation"

end_step
echo "[time] total: $(since "$START")"
echo "check-deploy: all checks passed"
