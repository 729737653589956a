# What this proves: the deployment files in packaging/ are valid without a
# cluster or a container engine:
#  - the Helm chart passes helm lint --strict, renders with the required
#    values and with every option on (HPA, ServiceMonitor, existingSecret),
#    refuses to render without PostgreSQL and S3 settings, and what it
#    renders passes kubeconform -strict for the oldest and newest Kubernetes
#    it allows;
#  - packaging/compose/compose.yaml matches the Compose Specification schema
#    and its depends_on name services that exist;
#  - and the check fails when they are broken: a value values.schema.json
#    rejects, a compose file with a dangling depends_on and a value
#    outside the schema.
# How: run packaging/check-deploy.sh (it builds helm and kubeconform from the
# Go module proxy on its first run, cached in tests/.cache) and read what it
# printed.

import os
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT

SCRIPT = os.path.join(REPO_ROOT, "packaging", "check-deploy.sh")


def run_check(env_extra=None, timeout=900):
    if not (shutil.which("go") or os.path.exists("/usr/local/go/bin/go")):
        pytest.skip("no Go toolchain: check-deploy.sh builds helm and kubeconform with go install")
    env = dict(os.environ, **(env_extra or {}))
    try:
        p = subprocess.run(["bash", SCRIPT], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env=env, timeout=timeout, text=True)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"check-deploy.sh still running after {timeout} s:\n{(e.stdout or '')[-3000:]}")
    return p.returncode, p.stdout


@pytest.mark.timeout(900)
def test_chart_and_compose_pass():
    rc, out = run_check()
    assert rc == 0, f"check-deploy.sh exited {rc}:\n{out[-5000:]}"
    for line in [
        "helm lint --strict (chart defaults): ok",
        "helm lint --strict required.yaml: ok",
        "helm lint --strict all-options.yaml: ok",
        "helm template (chart defaults alone): refused as expected: objectStore is required",
        "helm template -f required.yaml: 6 resources: "
        "ConfigMap Deployment PodDisruptionBudget Secret Service ServiceAccount",
        "helm template -f all-options.yaml: 7 resources: ConfigMap Deployment "
        "HorizontalPodAutoscaler PodDisruptionBudget Service ServiceAccount ServiceMonitor",
        "check-deploy: all checks passed",
    ]:
        assert line in out.splitlines(), f"check-deploy.sh did not print {line!r}:\n{out[-5000:]}"
    summaries = [l for l in out.splitlines() if l.startswith("Summary: ")]
    assert summaries == [
        "Summary: 6 resources found in 1 file - Valid: 6, Invalid: 0, Errors: 0, Skipped: 0",
        "Summary: 7 resources found in 1 file - Valid: 7, Invalid: 0, Errors: 0, Skipped: 0",
    ] * 2, f"kubeconform did not validate every resource, for both Kubernetes versions:\n{out[-5000:]}"
    assert "ServiceMonitor rutomq is valid" in out, "the ServiceMonitor was not validated against its CRD"
    assert any(l.startswith("compose: ") and "compose.yaml: valid against compose-spec.json (4 services, "
               "3 depends_on checked)" in l for l in out.splitlines()), out[-3000:]


@pytest.mark.timeout(900)
def test_value_rejected_by_schema_fails():
    rc, out = run_check({"CHECK_DEPLOY_HELM_SET": "replicaCount=notanumber"})
    assert rc != 0, f"check-deploy.sh passed with replicaCount=notanumber:\n{out[-3000:]}"
    assert "/replicaCount': got string, want integer" in out, out[-3000:]
    assert "FAIL: helm lint --strict" in out, out[-3000:]


@pytest.mark.timeout(900)
def test_broken_compose_fails(tmp_path):
    with open(os.path.join(REPO_ROOT, "packaging", "compose", "compose.yaml")) as f:
        text = f.read()
    broken = text.replace("      create-bucket:\n        condition: service_completed_successfully",
                          "      make-bucket:\n        condition: service_completed_successfully")
    broken = broken.replace("pull_policy: build", "pull_policy: sometimes")
    assert broken.count("make-bucket") == 1 and "pull_policy: sometimes" in broken
    path = tmp_path / "compose.yaml"
    path.write_text(broken)
    rc, out = run_check({"CHECK_DEPLOY_COMPOSE": str(path)})
    assert rc != 0, f"check-deploy.sh passed a broken compose file:\n{out[-3000:]}"
    assert "services/rutomq/depends_on: no service named 'make-bucket'" in out, out[-3000:]
    assert "services/rutomq/pull_policy: 'sometimes' does not match" in out, out[-3000:]
    assert "FAIL: compose validation" in out, out[-3000:]
