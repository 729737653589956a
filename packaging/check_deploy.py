"""Helpers for check-deploy.sh, run with the venv's Python (PyYAML, jsonschema).

k8s-schemas: kubeconform wants one self-contained JSON schema per kind. The
schemas shipped in the kubernetes-validate wheel (PyPI) point at a shared
_definitions.json through an https://kubernetes.io/ id that kubeconform
would try to fetch, so each kind the manifests use is written out here with
the definitions it reaches inlined. CRDs given with --crd become schemas the
same way, from their openAPIV3Schema.

compose: the Compose Specification schema checks shape only, so the
references between services that `docker compose` would reject at start
are checked here too.
"""

import argparse
import json
import os
import re
import sys

import jsonschema
import yaml

DEFS_URL = "/api/_definitions.json#"


def schema_name(api_version, kind):
    # kubeconform's file name for a kind: deployment-apps-v1, service-v1,
    # servicemonitor-monitoring-v1.
    group, _, version = api_version.rpartition("/")
    suffix = f"{group.split('.')[0]}-{version}" if group else version
    return f"{kind.lower()}-{suffix.lower()}"


def refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            else:
                yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)


def rewrite_refs(node):
    if isinstance(node, dict):
        return {k: (v.replace(DEFS_URL, "#", 1) if k == "$ref" and isinstance(v, str) else rewrite_refs(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [rewrite_refs(v) for v in node]
    return node


def standalone(kind_schema, defs):
    """The kind's schema with every definition it reaches, and no remote id."""
    wanted, todo = set(), [r for r in refs(kind_schema)]
    while todo:
        ref = todo.pop()
        name = ref.split("#/$defs/", 1)[-1]
        if name in wanted:
            continue
        if name not in defs:
            raise SystemExit(f"unresolvable $ref {ref}")
        wanted.add(name)
        todo.extend(refs(defs[name]))
    out = {k: v for k, v in kind_schema.items() if k != "$id"}
    out = rewrite_refs(out)
    out["$defs"] = {n: defs[n] for n in sorted(wanted)}
    return out


def close_objects(node):
    """additionalProperties: false wherever a CRD schema lists properties and
    does not say otherwise, so kubeconform -strict catches misspelt fields
    in custom resources too."""
    if isinstance(node, dict):
        node = {k: close_objects(v) for k, v in node.items()}
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        return node
    if isinstance(node, list):
        return [close_objects(v) for v in node]
    return node


def crd_schemas(paths):
    out = {}
    for path in paths:
        with open(path) as f:
            for crd in yaml.safe_load_all(f):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                spec = crd["spec"]
                for v in spec["versions"]:
                    schema = close_objects(v["schema"]["openAPIV3Schema"])
                    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
                    out[schema_name(f"{spec['group']}/{v['name']}", spec["names"]["kind"])] = schema
    return out


def cmd_k8s_schemas(a):
    kinds = set()
    for path in a.manifests:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    kinds.add(schema_name(doc["apiVersion"], doc["kind"]))
    crds = crd_schemas(a.crd)
    for version in a.versions:
        src = os.path.join(a.src, f"v{version}-local-strict")
        dst = os.path.join(a.out, f"v{version}-standalone-strict")
        os.makedirs(dst, exist_ok=True)
        with open(os.path.join(src, "_definitions.json")) as f:
            defs = json.load(f)["$defs"]
        for name in sorted(kinds):
            path = os.path.join(src, name + ".json")
            if name in crds:
                schema, origin = crds[name], "CRD"
            elif os.path.exists(path):
                with open(path) as f:
                    schema, origin = standalone(json.load(f), defs), "kubernetes-validate"
            else:
                # Left missing on purpose: kubeconform then fails on the kind.
                print(f"  no schema for {name} at v{version}")
                continue
            with open(os.path.join(dst, name + ".json"), "w") as f:
                json.dump(schema, f)
            print(f"  schema v{version} {name} ({origin})")


# ---- compose ---------------------------------------------------------------

VAR = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
GO_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
DURATION_KEYS = {"interval", "timeout", "start_period", "start_interval", "stop_grace_period"}


def interpolate(node, env):
    """Compose substitutes ${VAR} before it checks types; do the same, with
    the defaults the file gives, so a port or a count written as a variable
    is checked as what it becomes."""
    if isinstance(node, dict):
        return {k: interpolate(v, env) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolate(v, env) for v in node]
    if not isinstance(node, str):
        return node

    def sub(m):
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3) or ""
        val = env.get(name)
        if op in (":-", "-"):
            return arg if val is None or (op == ":-" and val == "") else val
        if op in (":?", "?"):
            if val is None or (op == ":?" and val == ""):
                raise SystemExit(f"required variable {name} is not set: {arg}")
            return val
        if op == ":+":
            return arg if val else ""
        if op == "+":
            return arg if val is not None else ""
        return val or ""

    return VAR.sub(sub, node)


def durations(node, path=""):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in DURATION_KEYS and isinstance(v, str):
                yield f"{path}.{k}", v
            yield from durations(v, f"{path}.{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from durations(v, f"{path}[{i}]")


def cmd_compose(a):
    with open(a.schema) as f:
        schema = json.load(f)
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    failed = False
    for path in a.files:
        with open(path) as f:
            doc = yaml.safe_load(f)
        # An empty environment: what the file says by itself, not this shell.
        doc = interpolate(doc, {})
        problems = [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                    for e in validator_cls(schema).iter_errors(doc)]
        services = doc.get("services") or {}
        volumes = set(doc.get("volumes") or {})
        for name, svc in services.items():
            deps = svc.get("depends_on") or {}
            for dep, how in (deps.items() if isinstance(deps, dict) else ((d, {}) for d in deps)):
                if dep not in services:
                    problems.append(f"services/{name}/depends_on: no service named {dep!r}")
                    continue
                cond = (how or {}).get("condition")
                if cond == "service_healthy" and not services[dep].get("healthcheck"):
                    problems.append(f"services/{name}/depends_on/{dep}: service_healthy, but {dep} has no healthcheck")
            for v in svc.get("volumes") or []:
                src = v.split(":", 1)[0] if isinstance(v, str) and ":" in v else (v.get("source") if isinstance(v, dict) else None)
                if src and not src.startswith((".", "/", "~", "$")) and src not in volumes:
                    problems.append(f"services/{name}/volumes: named volume {src!r} is not declared")
            build = svc.get("build")
            if isinstance(build, dict):
                ctx = os.path.join(os.path.dirname(os.path.abspath(path)), build.get("context", "."))
                dockerfile = os.path.join(ctx, build.get("dockerfile", "Dockerfile"))
                if not os.path.isfile(dockerfile):
                    problems.append(f"services/{name}/build: no Dockerfile at {dockerfile}")
        for where, value in durations(doc):
            if not GO_DURATION.match(value):
                problems.append(f"{where}: {value!r} is not a duration")
        if problems:
            failed = True
            print(f"compose: {path}: INVALID")
            for p in problems:
                print(f"  {p}")
        else:
            deps = sum(len(s.get("depends_on") or {}) for s in services.values())
            print(f"compose: {path}: valid against {os.path.basename(a.schema)} "
                  f"({len(services)} services, {deps} depends_on checked)")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("k8s-schemas")
    k.add_argument("--src", required=True, help="kubernetes-validate's kubernetes-json-schema directory")
    k.add_argument("--out", required=True)
    k.add_argument("--versions", required=True, type=lambda s: s.split(","))
    k.add_argument("--crd", action="append", default=[])
    k.add_argument("manifests", nargs="+")
    c = sub.add_parser("compose")
    c.add_argument("--schema", required=True)
    c.add_argument("files", nargs="+")
    a = p.parse_args()
    sys.exit(cmd_k8s_schemas(a) if a.cmd == "k8s-schemas" else cmd_compose(a))


if __name__ == "__main__":
    main()
