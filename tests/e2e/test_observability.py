# What this proves: the Grafana dashboard and the Prometheus alerting rules
# in packaging/observability/ only name metrics an agent really exports, with
# label values it really uses, and both files are well formed:
#  - every metric named in a dashboard query, its instance variable, or an
#    alert expression is on a live agent's /metrics after produce, fetch and
#    group traffic (histograms through their _bucket/_sum/_count series;
#    `up` is Prometheus' own); a selector's literal label values exist too,
#    so a misspelt window stage fails like a misspelt metric; the consumer
#    lag gauges carry the traffic's group and topic (the agent measures lag
#    every second here);
#  - the checker itself reports a made-up name (it cannot pass vacuously);
#  - the dashboard parses, every panel but the rows has the ${DS_PROMETHEUS}
#    datasource and queries; every alert has `for`, a severity, a summary
#    and a description;
#  - promtool accepts the rules file and every dashboard query (as recording
#    rules, Grafana's variables filled in), and its rule unit tests show the
#    main alerts fire on the series they are meant for and stay quiet on
#    healthy ones.
# How: one agent (--group-lag-interval-ms 1000); confluent-kafka produces, a
# group consumer reads and commits; /metrics is read over HTTP. promtool comes
# from tests/clients/promtool.sh (built from its Go module by scripts/test.sh
# beforehand); its checks skip only when it cannot be built.

import json
import os
import re
import subprocess
import time
import uuid

import pytest
import yaml

from kafkautil import create_topic, make_records, produce_confluent, unique_topic, wait_until

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OBS = os.path.join(REPO, "packaging", "observability")
DASHBOARD = os.path.join(OBS, "grafana-dashboard.json")
ALERTS = os.path.join(OBS, "alerts.yaml")
PROMTOOL_SH = os.path.join(REPO, "tests", "clients", "promtool.sh")

# Series Prometheus makes itself for every target.
SYNTHETIC = {"up"}
# Labels Prometheus attaches from the target, not the agent.
TARGET_LABELS = {"instance", "job"}
PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
                "group_right", "offset", "bool", "inf", "nan", "start", "end"}
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"


# --------------------------------------------------------------------------
# the two files


def load_dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def load_alerts():
    with open(ALERTS) as f:
        return yaml.safe_load(f)


def dashboard_panels(dash):
    """Every panel, those inside collapsed rows too."""
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


def dashboard_exprs(dash):
    """(where, PromQL) of every panel query."""
    for p in dashboard_panels(dash):
        for t in p.get("targets", []):
            yield f"panel {p['id']} {p['title']!r} query {t.get('refId')}", t["expr"]


def variable_metrics(dash):
    """(where, metric) of the query variables: only label_values(metric, label)
    names a metric (its second argument is a label)."""
    for v in dash["templating"]["list"]:
        if v["type"] != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(rf"\s*label_values\(\s*({NAME})\s*(\{{[^}}]*\}})?\s*,\s*{NAME}\s*\)\s*", q)
        assert m, f"variable {v['name']}: query {q!r} is not label_values(metric, label)"
        yield f"variable {v['name']}", m.group(1) + (m.group(2) or "")


def alert_rules(rules):
    for g in rules["groups"]:
        for r in g["rules"]:
            yield g["name"], r


# --------------------------------------------------------------------------
# PromQL: the metric names and label matchers an expression uses


def _blank_strings(expr):
    return re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)


def metric_names(expr):
    """Metric names an expression selects. Grafana variables, strings, label
    matchers, ranges and grouping label lists go first; what is left that
    looks like a name is a metric unless it is called (a function or an
    aggregation) or a PromQL keyword. Numbers like 1e6 or 5m never start a
    name: a name must not follow a digit or a dot."""
    e = re.sub(r"\$\{[^}]*\}|\$\w+", " ", expr)
    e = _blank_strings(e)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(rf"(?<![\w.:])({NAME})(\s*\()?", e):
        if m.group(2) or m.group(1).lower() in PROMQL_WORDS:
            continue
        names.add(m.group(1))
    return names


def label_matchers(expr):
    """(metric, label, op, value) of every matcher written after a metric
    name; values holding a Grafana variable come back as None."""
    e = re.sub(r"\$\{[^}]*\}", "$v", expr)
    out = []
    for sel in re.finditer(rf"(?<![\w.:])({NAME})\s*\{{([^}}]*)\}}", e):
        for m in re.finditer(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"', sel.group(2)):
            value = None if "$" in m.group(3) else m.group(3)
            out.append((sel.group(1), m.group(1), m.group(2), value))
    return out


def test_promql_name_extraction():
    """The extractor on the shapes the two files use, and on ones they might."""
    e = ('histogram_quantile(0.99, sum by (instance, le) (rate(rutomq_window_stage_seconds_bucket'
         '{stage="commit",instance=~"$instance"}[$__rate_interval]))) > 0.25')
    assert metric_names(e) == {"rutomq_window_stage_seconds_bucket"}
    assert label_matchers(e) == [("rutomq_window_stage_seconds_bucket", "stage", "=", "commit"),
                                 ("rutomq_window_stage_seconds_bucket", "instance", "=~", None)]
    e = ('sum(rate(a_total[5m] offset 1h)) by (job) / on (instance) group_left(shard) '
         'b_total - time() < 14 * 86400 and absent(up{job="x"}) or c unless 1e6 * d:rule')
    assert metric_names(e) == {"a_total", "b_total", "up", "c", "d:rule"}
    assert metric_names('count_values("version", build_info)') == {"build_info"}
    assert metric_names("rate(x_total[$__rate_interval]) / ${factor}") == {"x_total"}


# --------------------------------------------------------------------------
# /metrics


class Exported:
    """An agent's /metrics: each family's type (from its TYPE line), and the
    label pairs its samples carry."""

    def __init__(self, metrics):
        self.types = {}
        for line in metrics.raw.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(None, 3)
                self.types[name] = kind.strip()
        self.labels = {}
        for name, labels, _ in metrics.samples:
            pairs = self.labels.setdefault(name, set())
            for m in re.finditer(r'(\w+)="((?:[^"\\]|\\.)*)"', labels):
                pairs.add((m.group(1), m.group(2)))

    def has(self, name):
        """Whether `name` is a series name the agent exports: a counter or
        gauge family, or a histogram's (summary's) family plus one of its
        suffixes; a bare histogram name is not a series."""
        if name in SYNTHETIC:
            return True
        kind = self.types.get(name)
        if kind in ("counter", "gauge", "untyped"):
            return True
        for suffix, kinds in (("_bucket", ("histogram",)), ("_sum", ("histogram", "summary")),
                              ("_count", ("histogram", "summary"))):
            if name.endswith(suffix) and self.types.get(name[: -len(suffix)]) in kinds:
                return True
        return False

    def problems(self, where, expr):
        """What `expr` names that the agent does not export."""
        out = [f"{where}: metric {n} is not exported" for n in sorted(metric_names(expr))
               if not self.has(n)]
        for metric, label, op, value in label_matchers(expr):
            if metric in SYNTHETIC or label in TARGET_LABELS or not self.has(metric):
                continue
            pairs = self.labels.get(metric, set())
            if label not in {k for k, _ in pairs}:
                out.append(f"{where}: {metric} has no label {label}")
            elif op == "=" and value is not None and (label, value) not in pairs:
                out.append(f"{where}: {metric} has no series with {label}=\"{value}\"")
        return out


def traffic(agent):
    """Produce, a group consumer that reads everything and commits, so the
    produce, fetch, flush and group figures have moved. Returns the (topic,
    group)."""
    from confluent_kafka import Consumer
    topic = unique_topic("obs")
    create_topic(agent.bootstrap, topic, partitions=2)
    records = produce_confluent(agent.bootstrap, topic, make_records(300, big=False))
    group = "obs-" + uuid.uuid4().hex[:8]
    c = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 60
        while got < len(records):
            assert time.monotonic() < deadline, f"read {got} of {len(records)} records in 60 s"
            for m in c.consume(num_messages=500, timeout=0.5):
                assert m.error() is None, f"consumer error: {m.error()}"
                got += 1
        c.commit(asynchronous=False)
    finally:
        c.close()
    return topic, group


@pytest.fixture
def lag_agent(start_agent):
    """An agent that measures consumer lag every second, not every 30."""
    return start_agent(extra_args=["--group-lag-interval-ms", "1000"])


def test_dashboard_and_alerts_name_only_exported_metrics(lag_agent):
    agent = lag_agent
    topic, group = traffic(agent)
    # Counters move as the answers go out; the commit stage is observed just
    # after the produce answer, so wait for the figures rather than race them.
    wait_until("produce, fetch, window commit and offset commit figures",
               lambda: all(agent.metrics().get(k, 0) > 0 for k in (
                   "rutomq_produce_latency_seconds_count", "rutomq_fetch_bytes_total",
                   "rutomq_committed_windows_total", "rutomq_group_offset_commits_total")),
               timeout=30, diag=lambda: agent.metrics().raw[-3000:])
    # The lag gauges have series, not only their TYPE lines: the group read
    # and committed everything, so it is measured at no lag.
    lag_series = [f'rutomq_consumer_group_lag{{group="{group}",topic="{topic}"}} 0',
                  f'rutomq_consumer_group_lag_max{{group="{group}",topic="{topic}"}} 0']
    wait_until("consumer lag series of the group",
               lambda: all(s in agent.metrics().raw.splitlines() for s in lag_series),
               timeout=30, diag=lambda: [l for l in agent.metrics().raw.splitlines()
                                         if "consumer_group_lag" in l])
    exported = Exported(agent.metrics())
    dash = load_dashboard()
    rules = load_alerts()

    problems = []
    checked = set()
    for where, expr in dashboard_exprs(dash):
        problems += exported.problems(f"dashboard {where}", expr)
        checked |= metric_names(expr)
    for where, expr in variable_metrics(dash):
        problems += exported.problems(f"dashboard {where}", expr)
        checked |= metric_names(expr)
    for group, r in alert_rules(rules):
        problems += exported.problems(f"alerts.yaml {group}/{r['alert']}", r["expr"])
        checked |= metric_names(r["expr"])
    assert not problems, "\n".join(problems)
    # An extractor that found nothing would pass anything.
    assert len(checked) >= 40, f"only {len(checked)} metric names found: {sorted(checked)}"

    # The checker fails a made-up name, a bare histogram name, a counter with
    # a histogram suffix, and a stage that does not exist.
    for expr, want in [
        ("rate(rutomq_produce_records_total[5m])", "rutomq_produce_records_total is not exported"),
        ("rutomq_produce_latency_seconds", "rutomq_produce_latency_seconds is not exported"),
        ("rutomq_requests_total_bucket", "rutomq_requests_total_bucket is not exported"),
        ('rutomq_window_stage_seconds_count{stage="flush"}', 'stage="flush"'),
        ('rutomq_requests_total{topic="x"}', "has no label topic"),
        ('rutomq_consumer_group_lag{group="no-such-group"}', 'group="no-such-group"'),
    ]:
        got = exported.problems("probe", expr)
        assert any(want in p for p in got), f"{expr}: {got}"


def test_dashboard_is_well_formed():
    dash = load_dashboard()
    assert dash["uid"] and dash["title"] and dash["schemaVersion"] >= 36
    assert [i["name"] for i in dash["__inputs"]] == ["DS_PROMETHEUS"]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    assert variables["instance"]["type"] == "query"
    ds = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
    ids = []
    for p in dashboard_panels(dash):
        ids.append(p["id"])
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, f"panel {p['id']} {p['title']!r} is wider than the grid"
        if p["type"] == "row":
            continue
        assert p.get("datasource") == ds, f"panel {p['id']} {p['title']!r}: datasource {p.get('datasource')}"
        assert p.get("targets"), f"panel {p['id']} {p['title']!r} has no queries"
        for t in p["targets"]:
            assert t.get("datasource") == ds, f"panel {p['id']} query {t.get('refId')}: datasource"
            assert t.get("expr", "").strip(), f"panel {p['id']} query {t.get('refId')}: no expr"
            # Without the variable a panel shows every agent whatever is picked.
            assert 'instance=~"$instance"' in t["expr"], \
                f"panel {p['id']} query {t.get('refId')} ignores $instance: {t['expr']}"
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), f"panel {p['id']}: repeated refIds {refs}"
    assert len(ids) == len(set(ids)), f"repeated panel ids: {sorted(ids)}"


def test_alert_rules_are_well_formed():
    rules = load_alerts()
    names = []
    for group, r in alert_rules(rules):
        where = f"{group}/{r.get('alert')}"
        assert set(r) == {"alert", "expr", "for", "labels", "annotations"}, f"{where}: keys {sorted(r)}"
        assert re.fullmatch(r"\d+[smhd]", str(r["for"])), f"{where}: for {r['for']!r}"
        assert r["labels"].get("severity") in ("critical", "warning", "info"), f"{where}: severity"
        assert r["annotations"].get("summary", "").strip(), f"{where}: no summary"
        assert r["annotations"].get("description", "").strip(), f"{where}: no description"
        names.append(r["alert"])
    assert len(names) == len(set(names)), f"repeated alert names: {sorted(names)}"


# --------------------------------------------------------------------------
# promtool


@pytest.fixture(scope="module")
def promtool():
    try:
        res = subprocess.run(["bash", PROMTOOL_SH], cwd=REPO, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=280)
    except subprocess.TimeoutExpired:
        pytest.skip("promtool could not be built within 280 s (scripts/test.sh builds it beforehand)")
    if res.returncode != 0:
        pytest.skip(f"promtool cannot be built here: {res.stderr[-2000:]}")
    return res.stdout.strip().splitlines()[-1]


def run_promtool(promtool, *args, cwd=None):
    res = subprocess.run([promtool, *args], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, f"promtool {' '.join(args)}: exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def test_promtool_accepts_the_rules(promtool):
    out = run_promtool(promtool, "check", "rules", "--lint=all", "--lint-fatal", ALERTS)
    n = sum(1 for _ in alert_rules(load_alerts()))
    assert f"SUCCESS: {n} rules found" in out, out


def test_promtool_accepts_the_dashboard_queries(promtool, tmp_path):
    """Every panel query is valid PromQL once Grafana's variables are filled in."""
    rules = []
    for p in dashboard_panels(load_dashboard()):
        for t in p.get("targets", []):
            expr = (t["expr"].replace("$__rate_interval", "1m")
                    .replace("$instance", ".+"))
            assert "$" not in expr, f"panel {p['id']}: unknown variable in {t['expr']}"
            rules.append({"record": f"rutomq_dashboard:panel_{p['id']}_{t['refId']}", "expr": expr})
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    out = run_promtool(promtool, "check", "rules", str(path))
    assert f"SUCCESS: {len(rules)} rules found" in out, out


# promtool's rule unit tests: series that should make the main alerts fire,
# and healthy ones that should not. Annotations are compared whole, so the
# templates are checked too.
ALERT_UNIT_TESTS = """
rule_files:
  - {alerts}
evaluation_interval: 1m
tests:
  - name: an agent that stops answering scrapes
    interval: 1m
    input_series:
      - series: 'up{{job="rutomq", instance="a:8080"}}'
        values: '1 1 0 0 0 0 0'
      - series: 'up{{job="rutomq", instance="b:8080"}}'
        values: '1x6'
    alert_rule_test:
      - eval_time: 3m
        alertname: RutomqAgentDown
      - eval_time: 5m
        alertname: RutomqAgentDown
        exp_alerts:
          - exp_labels: {{severity: critical, job: rutomq, instance: "a:8080"}}
            exp_annotations:
              summary: "rutomq agent a:8080 is down"
              description: "Prometheus has not been able to scrape a:8080 for 2 minutes. Its partitions and groups move to the other agents once its registration expires; producers and consumers that were connected to it reconnect."

  - name: produce acknowledgements slow on one agent
    interval: 1m
    input_series:
      # a: 90 of every 100 requests within 1 s, the rest within 2 s (p99 1.9 s).
      - series: 'rutomq_produce_latency_seconds_bucket{{instance="a:8080", le="1"}}'
        values: '0+90x30'
      - series: 'rutomq_produce_latency_seconds_bucket{{instance="a:8080", le="2"}}'
        values: '0+100x30'
      - series: 'rutomq_produce_latency_seconds_bucket{{instance="a:8080", le="5"}}'
        values: '0+100x30'
      - series: 'rutomq_produce_latency_seconds_bucket{{instance="a:8080", le="+Inf"}}'
        values: '0+100x30'
      # b: all within 0.1 s.
      - series: 'rutomq_produce_latency_seconds_bucket{{instance="b:8080", le="0.1"}}'
        values: '0+100x30'
      - series: 'rutomq_produce_latency_seconds_bucket{{instance="b:8080", le="1"}}'
        values: '0+100x30'
      - series: 'rutomq_produce_latency_seconds_bucket{{instance="b:8080", le="+Inf"}}'
        values: '0+100x30'
    alert_rule_test:
      - eval_time: 10m
        alertname: RutomqProduceAckLatencyHigh
      - eval_time: 20m
        alertname: RutomqProduceAckLatencyHigh
        exp_alerts:
          - exp_labels: {{severity: warning, instance: "a:8080"}}
            exp_annotations:
              summary: "Produce ack p99 is 1.9s on a:8080"
              description: "99% of produce requests should be answered within a second (flush window, object upload and PostgreSQL commit). Look at the window stage panels of the dashboard to see which stage grew: upload points at the object store, commit at PostgreSQL, queued or gather at the agent itself."
      - eval_time: 20m
        alertname: RutomqProduceAckLatencyCritical

  - name: batches appended but no window committed
    interval: 1m
    input_series:
      - series: 'rutomq_produce_batches_total{{instance="a:8080"}}'
        values: '0+50x20'
      - series: 'rutomq_committed_windows_total{{instance="a:8080"}}'
        values: '0+10x5 50x15'
      - series: 'rutomq_produce_batches_total{{instance="b:8080"}}'
        values: '0+50x20'
      - series: 'rutomq_committed_windows_total{{instance="b:8080"}}'
        values: '0+10x20'
    alert_rule_test:
      - eval_time: 8m
        alertname: RutomqProduceNotCommitting
      - eval_time: 16m
        alertname: RutomqProduceNotCommitting
        exp_alerts:
          - exp_labels: {{severity: critical, instance: "a:8080"}}
            exp_annotations:
              summary: "a:8080 takes produce requests but commits nothing"
              description: "Record batches are appended but no flush window has been committed for 5 minutes: produce requests are not being acknowledged. Check the object store (upload failures) and PostgreSQL (commit failures) from this agent."

  - name: slow window commits, fast uploads
    interval: 1m
    input_series:
      - series: 'rutomq_window_stage_seconds_bucket{{instance="a:8080", stage="commit", le="0.1"}}'
        values: '0+50x30'
      - series: 'rutomq_window_stage_seconds_bucket{{instance="a:8080", stage="commit", le="0.5"}}'
        values: '0+100x30'
      - series: 'rutomq_window_stage_seconds_bucket{{instance="a:8080", stage="commit", le="+Inf"}}'
        values: '0+100x30'
      - series: 'rutomq_window_stage_seconds_bucket{{instance="a:8080", stage="upload", le="0.1"}}'
        values: '0+100x30'
      - series: 'rutomq_window_stage_seconds_bucket{{instance="a:8080", stage="upload", le="0.5"}}'
        values: '0+100x30'
      - series: 'rutomq_window_stage_seconds_bucket{{instance="a:8080", stage="upload", le="+Inf"}}'
        values: '0+100x30'
    alert_rule_test:
      - eval_time: 20m
        alertname: RutomqWindowCommitSlow
        exp_alerts:
          - exp_labels: {{severity: warning, instance: "a:8080"}}
            exp_annotations:
              summary: "Window commit p99 is 492ms on a:8080"
              description: "Flush windows wait more than 250 ms from uploaded to committed in PostgreSQL (the histogram ends at 0.5 s). Commits are grouped and in order, so this is PostgreSQL's commit latency plus any queue behind it: check PostgreSQL's load, locks and disk."
      - eval_time: 20m
        alertname: RutomqObjectUploadSlow

  - name: TLS certificates, one expiring and one far off, and no TLS
    interval: 1m
    input_series:
      # Seconds since the epoch; the test's clock starts at 0.
      - series: 'rutomq_tls_certificate_not_after_seconds{{instance="a:8080"}}'
        values: '864000x150'
      - series: 'rutomq_tls_certificate_not_after_seconds{{instance="b:8080"}}'
        values: '86400000x150'
      - series: 'rutomq_tls_certificate_not_after_seconds{{instance="c:8080"}}'
        values: '0x150'
    alert_rule_test:
      - eval_time: 2h
        alertname: RutomqTlsCertificateExpiresSoon
        exp_alerts:
          - exp_labels: {{severity: warning, instance: "a:8080"}}
            exp_annotations:
              summary: "The TLS certificate of a:8080 expires within 14 days"
              description: "The certificate the agent serves expires in 9d 22h 0m 0s. Replace the file: the agent reloads it."

  - name: a group far behind, whose coordinator changes, and a healthy one
    interval: 1m
    input_series:
      # lagging: 200000 records behind on a:8080, which hands the group to
      # b:8080 after 10 minutes (one minute exported by both): the alert
      # keeps its pending time.
      - series: 'rutomq_consumer_group_lag{{instance="a:8080", group="lagging", topic="orders"}}'
        values: '200000x10'
      - series: 'rutomq_consumer_group_lag{{instance="b:8080", group="lagging", topic="orders"}}'
        values: '_x9 200000x20'
      # healthy: a few hundred records behind, as a busy consumer is.
      - series: 'rutomq_consumer_group_lag{{instance="a:8080", group="healthy", topic="orders"}}'
        values: '300 500 200 400 300 500 200 400 300 500 200 400 300 500 200 400 300 500 200 400 300 500 200 400 300 500 200 400 300 500'
    alert_rule_test:
      - eval_time: 10m
        alertname: RutomqConsumerGroupLagHigh
      - eval_time: 20m
        alertname: RutomqConsumerGroupLagHigh
        exp_alerts:
          - exp_labels: {{severity: warning, group: lagging, topic: orders}}
            exp_annotations:
              summary: "Consumer group lagging is 200k records behind on orders"
              description: "The committed offsets of group lagging have been more than 100000 records behind the high watermarks of topic orders for 15 minutes. Its consumers are too slow, stopped, or not committing; the dashboard's largest partition lag shows whether one partition holds it back."
      - eval_time: 20m
        alertname: RutomqConsumerGroupLagGrowing

  - name: a group falling further behind, one steadily behind, one growing from nothing
    interval: 1m
    input_series:
      # falling: 20000 records behind, 1000 more every minute.
      - series: 'rutomq_consumer_group_lag{{instance="a:8080", group="falling", topic="clicks"}}'
        values: '20000+1000x60'
      # steady: far behind but not growing (below the high-lag threshold).
      - series: 'rutomq_consumer_group_lag{{instance="a:8080", group="steady", topic="clicks"}}'
        values: '50000 52000 48000 51000 49000 50000 52000 48000 51000 49000 50000 52000 48000 51000 49000 50000 52000 48000 51000 49000 50000 52000 48000 51000 49000 50000 52000 48000 51000 49000 50000 52000 48000 51000 49000 50000 52000 48000 51000 49000 50000 52000 48000 51000 49000 50000 52000 48000 51000 49000 50000 52000 48000 51000 49000 50000 52000 48000 51000 49000 50000'
      # small: growing, but never past the floor.
      - series: 'rutomq_consumer_group_lag{{instance="a:8080", group="small", topic="clicks"}}'
        values: '0+100x60'
    alert_rule_test:
      - eval_time: 10m
        alertname: RutomqConsumerGroupLagGrowing
      - eval_time: 60m
        alertname: RutomqConsumerGroupLagGrowing
        exp_alerts:
          - exp_labels: {{severity: warning, group: falling, topic: clicks}}
            exp_annotations:
              summary: "Consumer group falling falls further behind on clicks"
              description: "The lag of group falling on topic clicks has kept growing, by 16.67 records/s over the last 30 minutes, and has stayed above 10000 records: its consumers read slower than producers write, and will not catch up by themselves."
      - eval_time: 60m
        alertname: RutomqConsumerGroupLagHigh
"""


def test_alerts_fire_on_the_series_they_are_meant_for(promtool, tmp_path):
    path = tmp_path / "alerts_test.yaml"
    path.write_text(ALERT_UNIT_TESTS.format(alerts=ALERTS))
    out = run_promtool(promtool, "test", "rules", str(path))
    assert "SUCCESS" in out, out
