# What this proves: rutomq coordinates consumer groups for the official Java
# client (kafka-clients 4.x) and franz-go the way Apache Kafka does:
#  - classic protocol churn under continuous produce (Java: three members join
#    one by one, one is SIGKILLed, one closes cleanly; franz-go: two members,
#    one closes cleanly): the assignment converges to the survivors, the last
#    one ends up with every partition, every acknowledged record is processed,
#    every assignment of a partition starts exactly at its committed offset,
#    and a record is processed twice only when the SIGKILLed member processed
#    it after its last accepted commit (without a kill: never);
#  - the KIP-848 consumer protocol (group.protocol=consumer) with the server's
#    default (uniform) and range assignors: two Java members split the
#    partitions (range: contiguous halves), DescribeConsumerGroups shows type
#    Consumer, the assignor, members with their assignments; after a SIGKILL
#    the survivor gets everything once the broker-side session expires, with
#    the same exactly-once-apart-from-the-kill checks;
#  - the Java AdminClient: listConsumerGroups with a state filter,
#    describeConsumerGroups (state, members, assignments, assignor,
#    coordinator), deleteConsumerGroups refused for a non-empty group
#    (GroupNotEmptyException), alterConsumerGroupOffsets refused while members
#    are in the group and accepted once empty (a new member starts exactly
#    there), deleteConsumerGroupOffsets, deleteConsumerGroups, and
#    GroupIdNotFoundException afterwards;
#  - a Java classic member and a franz-go member (both range) share one group.
# How: tests/clients/build.sh builds the group programs into the RoundTrip jar
# and binary (java: tests/java/src/main/java/GroupConsume.java and
# GroupAdmin.java; go: tests/go/group.go). Each member runs as a subprocess
# that prints every rebalance callback, every processed (partition, offset,
# record index), every commit attempt and every commit the broker accepted as
# JSON lines with CLOCK_MONOTONIC times, one write(2) per line; the tests
# replay those lines against the producer's delivery reports. The admin
# program reads commands on stdin and answers one JSON line each. Agents run
# with --group-initial-rebalance-delay-ms 300 (and, for KIP-848, a 6 s
# consumer session when the binary has --group-consumer-session-timeout-ms).
# Run with -s to see the rebalance times.

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict

import pytest

from conftest import require_binary
from kafkautil import (Rec, run_build_script, StreamProducer, committed_confluent, create_topic, finish_producing,
                       high_watermarks, make_value, produce_confluent, producing, unique_topic,
                       wait_until)

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_SH = os.path.join(REPO_ROOT, "tests", "clients", "build.sh")
RUN_SH = os.path.join(REPO_ROOT, "tests", "clients", "run.sh")
BUILD_TIMEOUT_S = 1200  # cold: Maven and Go module downloads

JAVA = "java-4"  # tests/clients/run.sh client: kafka-clients $JAVA_CLIENT_4
GO = "go"
GROUP_ARGS = ["--group-initial-rebalance-delay-ms", "300"]
SESSION_S = 6.0  # classic members' session.timeout.ms (Kafka's minimum)
KAFKA_CONSUMER_SESSION_S = 45.0  # Kafka's group.consumer.session.timeout.ms default



def _tail(path, n):
    try:
        with open(path, "rb") as f:
            return "\n".join(f.read().decode("utf-8", "replace").splitlines()[-n:])
    except OSError as e:
        return f"<cannot read {path}: {e}>"


@pytest.fixture(scope="session")
def group_clients():
    """Builds the Java and Go client programs once per session (idempotent)."""
    require_binary()  # skip before a cold build when there is no broker to test
    run_build_script(BUILD_SH, timeout=BUILD_TIMEOUT_S)
    return RUN_SH


# --------------------------------------------------------------------------
# group members as subprocesses


class Worker:
    """One group-consume process (Java or Go) and the events it printed."""

    def __init__(self, name, client, argv, events_path, log_path):
        self.name = name
        self.client = client
        self.argv = argv
        self.events_path = events_path
        self.log_path = log_path
        self.proc = None
        self._pos = 0
        self._buf = b""
        self._events = []

    def start(self):
        with open(self.events_path, "ab") as out, open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=log,
                                         cwd=REPO_ROOT, start_new_session=True)
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL: no LeaveGroup, no last commit."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def close(self, timeout=45.0):
        """SIGTERM: the program commits, closes its consumer (leaving the group) and exits 0."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            raise AssertionError(f"{self.name}: did not exit within {timeout:.0f}s of SIGTERM\n{self.diag()}")
        assert rc == 0, f"{self.name}: exit code {rc} after SIGTERM\n{self.diag()}"
        assert self.first("closed"), f"{self.name}: exited without printing 'closed'\n{self.diag()}"

    def cleanup(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait(timeout=30)

    def events(self):
        try:
            with open(self.events_path, "rb") as f:
                f.seek(self._pos)
                data = f.read()
        except FileNotFoundError:
            return self._events
        self._pos += len(data)
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            if line.strip():
                self._events.append(json.loads(line))
        return self._events

    def of(self, *kinds):
        return [e for e in self.events() if e["ev"] in kinds]

    def first(self, kind):
        evs = self.of(kind)
        return evs[0] if evs else None

    def current(self):
        """The assignment as this process's rebalance callbacks left it."""
        cur = set()
        for e in self.events():
            if e["ev"] == "assign":
                cur |= set(e["parts"] or ())
            elif e["ev"] in ("revoke", "lost"):
                cur -= set(e["parts"] or ())
        return cur

    def rebalance_events(self):
        return self.of("assign", "revoke", "lost")

    def last_assign_t(self):
        a = self.of("assign")
        return a[-1]["t"] if a else None

    def commits(self):
        """[(t, {partition: next offset})] the broker accepted."""
        return [(e["t"], {int(p): o for p, o in e["offsets"].items()}) for e in self.of("commit")]

    def n_records(self):
        return sum(len(e["r"]) for e in self.of("recs"))

    def diag(self, n_log=25):
        evs = self.events()
        state = "running" if self.alive() else f"exited rc={self.proc.returncode if self.proc else None}"
        notable = [e for e in evs if e["ev"] not in ("recs", "commit", "committing")][-14:]
        last_commit = next((e for e in reversed(evs) if e["ev"] == "commit"), None)
        t0 = evs[0]["t"] if evs else 0.0

        def fmt(e):
            rest = {k: v for k, v in e.items() if k not in ("ev", "t", "wall", "name")}
            return f"    +{e['t'] - t0:7.2f}s {e['ev']} {json.dumps(rest)[:400]}"

        return (f"--- member {self.name} ({self.client}, {state}, pid {self.proc.pid if self.proc else None}): "
                f"assignment {sorted(self.current())}, {self.n_records()} records processed, last commit "
                f"{last_commit['offsets'] if last_commit else None}\n"
                + "\n".join(fmt(e) for e in notable)
                + f"\n  client log tail ({self.log_path}):\n"
                + "\n".join("    " + line[:400] for line in _tail(self.log_path, n_log).splitlines()))


class Workers:
    def __init__(self, root, run_sh):
        self.root = root
        self.run_sh = run_sh
        os.makedirs(root, exist_ok=True)
        self.all = []

    def start(self, name, client, bootstrap, topic, group, *, protocol="classic", assignor=None,
              commit_interval_ms=0, session_ms=None, instance_id=None):
        argv = ["bash", self.run_sh, client, "group-consume", "--bootstrap", bootstrap, "--topic", topic,
                "--group", group, "--name", name, "--protocol", protocol,
                "--commit-interval-ms", str(commit_interval_ms)]
        if protocol == "classic":
            argv += ["--session-timeout-ms", str(session_ms or int(SESSION_S * 1000))]
        if assignor:
            argv += ["--assignor", assignor]
        if instance_id:
            argv += ["--instance-id", instance_id]
        w = Worker(name, client, argv, os.path.join(self.root, f"{name}.events.jsonl"),
                   os.path.join(self.root, f"{name}.log"))
        self.all.append(w)
        w.start()
        wait_until(f"{name} to subscribe", lambda: w.first("subscribed") or not w.alive(), 60, self.diag)
        assert w.alive(), f"{name} exited during start-up\n{self.diag()}"
        return w

    def diag(self):
        return "\n".join(w.diag() for w in self.all)


@pytest.fixture
def workers(request, tmp_path, group_clients):
    ws = Workers(str(tmp_path / "members"), group_clients)
    failed_before = request.session.testsfailed
    yield ws
    for w in ws.all:
        w.cleanup()
    if request.session.testsfailed > failed_before and ws.all:
        print("\n===== group members =====\n" + "\n".join(w.diag(n_log=60) for w in ws.all), file=sys.stderr)


class JavaAdmin:
    """One `group-admin` JVM (Java AdminClient) answering commands read from stdin."""

    def __init__(self, run_sh, bootstrap, log_path):
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(["bash", run_sh, JAVA, "group-admin", "--bootstrap", bootstrap],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         cwd=REPO_ROOT, start_new_session=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def __call__(self, *cmd, timeout=60.0):
        """Runs one command; returns its JSON answer (a dict with "ok")."""
        line = " ".join(str(c) for c in cmd)
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
            out = self.lines.get(timeout=timeout)
        except (OSError, queue.Empty) as e:
            raise AssertionError(f"group-admin: no answer to {line!r} ({e!r}); log tail:\n"
                                 f"{_tail(self.log_path, 40)}")
        if out is None:
            raise AssertionError(f"group-admin exited (rc {self.proc.poll()}) before answering {line!r}; "
                                 f"log tail:\n{_tail(self.log_path, 40)}")
        return json.loads(out)

    def ok(self, *cmd, timeout=60.0):
        res = self(*cmd, timeout=timeout)
        assert res.get("ok"), f"admin {' '.join(map(str, cmd))} failed: {res}"
        return res

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture
def java_admin(tmp_path, group_clients):
    started = []

    def _start(bootstrap):
        a = JavaAdmin(group_clients, bootstrap, str(tmp_path / f"admin{len(started)}.log"))
        started.append(a)
        return a

    yield _start
    for a in started:
        a.close()


# --------------------------------------------------------------------------
# checks over the members' output


def _covers(assignments, n_parts):
    """Disjoint, covering all partitions, nobody idle who could have work."""
    seen = []
    for parts in assignments.values():
        seen.extend(parts)
    if sorted(seen) != list(range(n_parts)):
        return False
    return len(assignments) > n_parts or all(assignments.values())


def wait_converged(members, n_parts, timeout, what, ws, still=1.5):
    """Wait until the running `members` hold disjoint, non-empty assignments
    covering all partitions, with no rebalance callback for `still` seconds.
    Returns (assignments, time the last of them got its assignment)."""
    deadline = time.monotonic() + timeout
    last_sig, since = None, None
    while True:
        dead = [w.name for w in members if not w.alive()]
        assert not dead, f"{what}: member(s) {dead} exited\n{ws.diag()}"
        cur = {w.name: w.current() for w in members}
        now = time.monotonic()
        if _covers(cur, n_parts):
            sig = tuple(len(w.rebalance_events()) for w in members)
            if sig != last_sig:
                last_sig, since = sig, now
            elif now - since >= still:
                return cur, max(w.last_assign_t() for w in members)
        else:
            last_sig = None
        if now > deadline:
            raise AssertionError(f"{what}: no stable assignment of {n_parts} partitions after {timeout:.0f}s: "
                                 f"{ {k: sorted(v) for k, v in cur.items()} }\n{ws.diag()}")
        time.sleep(0.1)


def wait_all_committed_after(members, t, ws, timeout=20):
    wait_until("every member to commit after the rebalance",
               lambda: all(any(ct > t for ct, _ in w.commits()) for w in members), timeout, ws.diag)


def max_committed(members):
    out = {}
    for w in members:
        for _, offs in w.commits():
            for p, o in offs.items():
                out[p] = max(out.get(p, -1), o)
    return out


def wait_committed_to(members, hw, timeout, ws):
    """Wait until the members' accepted commits reach each partition's high watermark."""
    def done():
        mc = max_committed(members)
        over = {p: (o, hw[p]) for p, o in mc.items() if o > hw[p]}
        assert not over, f"commits above the high watermark (committed, hw): {over}"
        return all(mc.get(p, 0) == hw[p] for p in hw if hw[p] > 0)
    wait_until(f"commits to reach the high watermarks {hw} (so far {max_committed(members)})",
               done, timeout, ws.diag)


def check_all_processed(members, acked):
    """Every acknowledged record was processed, at its acknowledged position, and nothing else was."""
    proc = {}
    for w in members:
        for e in w.of("recs"):
            for p, o, idx in e["r"]:
                prev = proc.setdefault((p, o), idx)
                assert prev == idx, f"({p}, {o}) read as record {prev} and as record {idx}"
    want = {pos: idx for idx, pos in acked.items()}
    missing = sorted(pos for pos in want if pos not in proc)
    wrong = [(pos, want[pos], proc[pos]) for pos in want if pos in proc and proc[pos] != want[pos]]
    extra = sorted(pos for pos in proc if pos not in want)
    assert not missing, (f"{len(missing)} of {len(want)} acknowledged records never processed by any member, "
                         f"e.g. (partition, offset) {missing[:15]}")
    assert not wrong, f"records processed at the wrong position (pos, acked idx, read idx): {wrong[:10]}"
    assert not extra, f"{len(extra)} records processed that no delivery report named: {extra[:10]}"


class History:
    """The members' output merged: commits, in-flight commit attempts and
    assignment sessions (one member holding one partition from an assign
    callback to the revoke/lost callback or the end of its output)."""

    def __init__(self, members):
        self.accepted = defaultdict(list)  # p -> [(t, next offset, member)]
        self.attempts = defaultdict(list)  # p -> [(t start, t outcome or inf, offset, member)]
        self.sessions = []  # dict(w, p, t_assign, first, n, problems)
        self.problems = []
        for w in members:
            evs = w.events()
            open_attempt = None
            cur = {}  # p -> session
            for e in evs:
                kind = e["ev"]
                if kind == "committing":
                    open_attempt = (e["t"], {int(p): o for p, o in e["offsets"].items()})
                elif kind in ("commit", "commit_err"):
                    if kind == "commit":
                        for p, o in e["offsets"].items():
                            self.accepted[int(p)].append((e["t"], o, w.name))
                    if open_attempt is not None:
                        for p, o in open_attempt[1].items():
                            self.attempts[p].append((open_attempt[0], e["t"], o, w.name))
                        open_attempt = None
                elif kind == "assign":
                    for p in e["parts"] or ():
                        s = dict(w=w, p=p, t_assign=e["t"], first=None, last=None, n=0)
                        cur[p] = s
                        self.sessions.append(s)
                elif kind in ("revoke", "lost"):
                    for p in e["parts"] or ():
                        cur.pop(p, None)
                elif kind == "recs":
                    for p, o, _ in e["r"]:
                        s = cur.get(p)
                        if s is None:
                            self.problems.append(f"{w.name} processed ({p}, {o}) without holding partition {p}")
                            continue
                        if s["first"] is None:
                            s["first"] = o
                        elif o != s["last"] + 1:
                            self.problems.append(f"{w.name}: partition {p} offsets not contiguous in one "
                                                 f"assignment: {s['last']} then {o}")
                        s["last"] = o
                        s["n"] += 1
            if open_attempt is not None:  # killed with a commit in flight
                for p, o in open_attempt[1].items():
                    self.attempts[p].append((open_attempt[0], float("inf"), o, w.name))
        for lst in self.accepted.values():
            lst.sort()

    def committed_before(self, p, t):
        """The offset of the last commit of `p` accepted before `t` (0 if none: earliest)."""
        before = [o for ct, o, _ in self.accepted[p] if ct < t]
        return before[-1] if before else 0

    def in_flight(self, p, t):
        return {o for t0, t1, o, _ in self.attempts[p] if t0 < t < t1}

    def check_resume_at_committed(self):
        """Every assignment session of a partition starts at its committed offset
        (or at the offset of a commit still in flight at that time)."""
        bad = list(self.problems)
        for s in self.sessions:
            if s["first"] is None:
                continue
            allowed = {self.committed_before(s["p"], s["t_assign"])} | self.in_flight(s["p"], s["t_assign"])
            if s["first"] not in allowed:
                bad.append(f"{s['w'].name} got partition {s['p']} and started at offset {s['first']}; "
                           f"committed then: {sorted(allowed)}")
        return bad


def check_duplicates(members, killed):
    """Re-processing is explained only by progress the SIGKILLed member made
    after its last accepted commit: a (partition, offset) processed twice must
    have been processed first by a member in `killed` ({member: t_kill}), again
    after the kill, at an offset at or past the partition's committed offset at
    kill time. Returns (number of re-processings, unexplained ones)."""
    hist = History(members)
    by_pos = defaultdict(list)
    for w in members:
        for e in w.of("recs"):
            for p, o, _ in e["r"]:
                by_pos[(p, o)].append((e["t"], w))
    n, bad = 0, []
    for (p, o), lst in sorted(by_pos.items()):
        if len(lst) < 2:
            continue
        n += len(lst) - 1
        lst.sort(key=lambda x: x[0])
        for (t0, w0), (t1, w1) in zip(lst, lst[1:]):
            if w0.name not in killed:
                bad.append(f"({p}, {o}) processed by {w0.name} (not killed) and again by {w1.name}")
                continue
            t_kill = killed[w0.name]
            c = hist.committed_before(p, t_kill)
            if t1 < t_kill:
                bad.append(f"({p}, {o}) processed twice before {w0.name} was killed ({w0.name}, {w1.name})")
            elif o < c:
                bad.append(f"({p}, {o}) processed by {w0.name} and again by {w1.name} after the kill, although "
                           f"offset {c} had been committed before the kill")
    return n, bad


def check_group_history(members, acked, killed, *, allow_dups=True):
    check_all_processed(members, acked)
    bad = History(members).check_resume_at_committed()
    assert not bad, "assignments that did not start at the committed offset:\n" + "\n".join(bad[:20])
    dups, bad = check_duplicates(members, killed)
    assert not bad, (f"{len(bad)} re-processings not explained by the killed member's uncommitted progress:\n"
                     + "\n".join(bad[:20]))
    if not allow_dups:
        assert dups == 0, f"{dups} records processed twice without any member killed"
    return dups


# --------------------------------------------------------------------------
# producing



def admin_offsets(adm, group, topic):
    res = adm.ok("offsets", group)
    return {o["partition"]: o["offset"] for o in res["offsets"] if o["topic"] == topic}


def members_by_client(desc):
    return {m["client_id"]: {p for _, p in m["assignment"]} for m in desc["members"]}


def consumer_protocol_args():
    """KIP-848 session and heartbeat for the agent: 6 s / 0.5 s when the binary
    has the flags (Kafka's group.consumer.*), else Kafka's defaults apply."""
    out = subprocess.run([require_binary(), "serve", "--help"], capture_output=True, text=True, timeout=30).stdout
    args, session_s = [], KAFKA_CONSUMER_SESSION_S
    if "--group-consumer-session-timeout-ms" in out:
        args += ["--group-consumer-session-timeout-ms", "6000"]
        session_s = 6.0
    if "--group-consumer-heartbeat-interval-ms" in out:
        args += ["--group-consumer-heartbeat-interval-ms", "500"]
    return args, session_s


# --------------------------------------------------------------------------
# tests


def test_java_classic_group_churn(start_agent, workers):
    a = start_agent(extra_args=GROUP_ARGS)
    n = 12
    topic, group = unique_topic("grpj-churn"), unique_topic("gj-churn")
    create_topic(a.bootstrap, topic, n)
    with producing(StreamProducer(a.bootstrap, topic, partitions=n, rate_per_sec=300)) as prod:
        prod.wait_acked(100, 30, "records before the first member joins")
        # The member that will be SIGKILLed commits only once a second, so that it
        # dies holding processed but uncommitted records.
        victim = workers.start("j-victim", JAVA, a.bootstrap, topic, group, commit_interval_ms=1000)
        _, t = wait_converged([victim], n, 40, "1 member", workers)
        print(f"\nfirst Java member assigned {t - victim.first('subscribed')['t']:.2f} s after subscribe()")
        leaver = workers.start("j-leaver", JAVA, a.bootstrap, topic, group)
        _, t = wait_converged([victim, leaver], n, 40, "2 members", workers)
        print(f"rebalance time for 2 members: {t - leaver.first('subscribed')['t']:.2f} s")
        survivor = workers.start("j-survivor", JAVA, a.bootstrap, topic, group)
        three, t = wait_converged([victim, leaver, survivor], n, 40, "3 members", workers)
        print(f"rebalance time for 3 members: {t - survivor.first('subscribed')['t']:.2f} s "
              f"{ {k: sorted(v) for k, v in three.items()} }")
        assert all(len(v) == 4 for v in three.values()), f"12 partitions over 3 members: {three}"
        members = [victim, leaver, survivor]
        wait_all_committed_after(members, t, workers)
        time.sleep(0.5)  # let the victim process a few records it will not commit

        t_kill = time.monotonic()
        victim.kill()
        _, t = wait_converged([leaver, survivor], n, SESSION_S + 20, "2 members after a SIGKILL", workers)
        print(f"SIGKILLed member's partitions reassigned after {t - t_kill:.2f} s "
              f"(session.timeout.ms={SESSION_S * 1000:.0f})")
        assert t - t_kill < SESSION_S + 12, f"reassignment took {t - t_kill:.1f}s after the SIGKILL"
        assert t - t_kill > SESSION_S - 1, (
            f"the SIGKILLed member's partitions moved {t - t_kill:.1f}s after the kill, before its "
            f"{SESSION_S:.0f}s session could expire\n{workers.diag()}")

        t_close = time.monotonic()
        leaver.close()
        _, t = wait_converged([survivor], n, 20, "the last member after a clean close", workers)
        print(f"cleanly closed member's partitions reassigned after {t - t_close:.2f} s")
        assert t - t_close < SESSION_S, (
            f"reassignment after a clean close took {t - t_close:.1f}s: LeaveGroup should not wait "
            f"for the {SESSION_S:.0f}s session timeout\n{workers.diag()}")
        prod.wait_acked(prod.acked_count() + 300, 30, "records for the last member alone")
        acked = finish_producing(prod)

    hw = high_watermarks(a.bootstrap, topic, n, acked)
    wait_committed_to(members, hw, 30, workers)
    assert survivor.current() == set(range(n)), f"survivor holds {sorted(survivor.current())}"
    dups = check_group_history(members, acked, {victim.name: t_kill})
    assert committed_confluent(a.bootstrap, group, topic, range(n)) == hw
    print(f"{len(acked)} records, {dups} processed twice (all after the killed member's last commit)")


def test_franz_go_group_churn(start_agent, workers):
    a = start_agent(extra_args=GROUP_ARGS)
    n = 6
    topic, group = unique_topic("grpg-churn"), unique_topic("gg-churn")
    create_topic(a.bootstrap, topic, n)
    with producing(StreamProducer(a.bootstrap, topic, partitions=n, rate_per_sec=200)) as prod:
        prod.wait_acked(60, 30, "records before the first member joins")
        leaver = workers.start("g-leaver", GO, a.bootstrap, topic, group)
        _, t = wait_converged([leaver], n, 30, "1 franz-go member", workers)
        print(f"\nfirst franz-go member assigned {t - leaver.first('subscribed')['t']:.2f} s after subscribe")
        survivor = workers.start("g-survivor", GO, a.bootstrap, topic, group)
        two, t = wait_converged([leaver, survivor], n, 30, "2 franz-go members", workers)
        print(f"rebalance time for 2 members: {t - survivor.first('subscribed')['t']:.2f} s "
              f"{ {k: sorted(v) for k, v in two.items()} }")
        assert all(len(v) == 3 for v in two.values()), f"6 partitions over 2 members: {two}"
        members = [leaver, survivor]
        wait_all_committed_after(members, t, workers)

        t_close = time.monotonic()
        leaver.close()
        _, t = wait_converged([survivor], n, 20, "the last member after a clean close", workers)
        print(f"cleanly closed member's partitions reassigned after {t - t_close:.2f} s")
        assert t - t_close < SESSION_S, (
            f"reassignment after a clean close took {t - t_close:.1f}s: LeaveGroup should not wait "
            f"for the {SESSION_S:.0f}s session timeout\n{workers.diag()}")
        prod.wait_acked(prod.acked_count() + 200, 30, "records for the last member alone")
        acked = finish_producing(prod)

    hw = high_watermarks(a.bootstrap, topic, n, acked)
    wait_committed_to(members, hw, 30, workers)
    assert survivor.current() == set(range(n)), f"survivor holds {sorted(survivor.current())}"
    check_group_history(members, acked, {}, allow_dups=False)
    assert committed_confluent(a.bootstrap, group, topic, range(n)) == hw
    print(f"{len(acked)} records, none processed twice")


@pytest.mark.parametrize("assignor", [None, "range"], ids=["uniform-default", "range"])
def test_java_consumer_protocol_group(start_agent, workers, java_admin, assignor):
    extra, session_s = consumer_protocol_args()
    a = start_agent(extra_args=GROUP_ARGS + extra)
    n = 6
    topic, group = unique_topic("grpj-848"), unique_topic("gj-848")
    create_topic(a.bootstrap, topic, n)
    adm = java_admin(a.bootstrap)
    kw = dict(protocol="consumer", assignor=assignor)
    with producing(StreamProducer(a.bootstrap, topic, partitions=n, rate_per_sec=200)) as prod:
        prod.wait_acked(60, 30, "records before the first member joins")
        stay = workers.start("k-stay", JAVA, a.bootstrap, topic, group, **kw)
        _, t = wait_converged([stay], n, 40, "1 KIP-848 member", workers)
        print(f"\nfirst KIP-848 member assigned {t - stay.first('subscribed')['t']:.2f} s after subscribe")
        victim = workers.start("k-victim", JAVA, a.bootstrap, topic, group, commit_interval_ms=1000, **kw)
        two, t = wait_converged([stay, victim], n, 40, "2 KIP-848 members", workers)
        print(f"reconciliation time for 2 members: {t - victim.first('subscribed')['t']:.2f} s "
              f"{ {k: sorted(v) for k, v in two.items()} }")
        assert all(len(v) == 3 for v in two.values()), f"6 partitions over 2 members: {two}"
        if assignor == "range":
            assert sorted(tuple(sorted(v)) for v in two.values()) == [(0, 1, 2), (3, 4, 5)], (
                f"the range assignor gives each member a contiguous half: {two}")
        members = [stay, victim]
        wait_all_committed_after(members, t, workers)

        d = adm.ok("describe", group)
        assert d["type"] == "Consumer", f"describeConsumerGroups type {d['type']}, want Consumer: {d}"
        assert d["state"] == "Stable", d
        assert d["assignor"] == (assignor or "uniform"), f"assignor {d['assignor']!r}: {d}"
        assert d["coordinator"]["port"] == a.port, d
        assert members_by_client(d) == {w.name: w.current() for w in members}, (
            f"described assignments {members_by_client(d)} differ from the members' callbacks\n{d}")
        for m in d["members"]:
            assert m["target"] is None or sorted(m["target"]) == sorted(m["assignment"]), (
                f"stable group, yet target != assignment for {m}")
        time.sleep(0.5)  # let the victim process a few records it will not commit

        t_kill = time.monotonic()
        victim.kill()
        _, t = wait_converged([stay], n, session_s + 20, "the survivor after a SIGKILL", workers)
        print(f"SIGKILLed member's partitions moved after {t - t_kill:.2f} s (consumer session {session_s:.0f} s)")
        assert t - t_kill > session_s - 1, (
            f"the SIGKILLed member's partitions moved {t - t_kill:.1f}s after the kill, before its "
            f"{session_s:.0f}s session could expire\n{workers.diag()}")
        prod.wait_acked(prod.acked_count() + 200, 30, "records for the survivor alone")
        acked = finish_producing(prod)

    hw = high_watermarks(a.bootstrap, topic, n, acked)
    wait_committed_to(members, hw, 30, workers)
    dups = check_group_history(members, acked, {victim.name: t_kill})
    assert admin_offsets(adm, group, topic) == hw
    d = adm.ok("describe", group)
    assert d["state"] == "Stable" and members_by_client(d) == {stay.name: set(range(n))}, d
    stay.close()
    wait_until("the group to be Empty after the last member left",
               lambda: (lambda d: d["state"] == "Empty" and not d["members"])(adm.ok("describe", group)),
               15, lambda: f"{adm('describe', group)}\n{workers.diag()}", interval=0.3)
    print(f"{len(acked)} records, {dups} processed twice (all after the killed member's last commit)")


def test_java_admin_groups(start_agent, workers, java_admin):
    a = start_agent(extra_args=GROUP_ARGS)
    n, per = 4, 100
    topic, group = unique_topic("grpj-admin"), unique_topic("gj-admin")
    create_topic(a.bootstrap, topic, n)
    produce_confluent(a.bootstrap, topic, [Rec(p * per + i, b"k", make_value(p * per + i, 30), [], partition=p)
                                           for p in range(n) for i in range(per)])
    adm = java_admin(a.bootstrap)
    c1 = workers.start("adm-1", JAVA, a.bootstrap, topic, group)
    c2 = workers.start("adm-2", JAVA, a.bootstrap, topic, group)
    two, t = wait_converged([c1, c2], n, 40, "2 members", workers)
    wait_committed_to([c1, c2], {p: per for p in range(n)}, 30, workers)

    cluster = adm.ok("cluster")
    listed = {g["group"]: g for g in adm.ok("list")["groups"]}
    assert group in listed and listed[group]["state"] == "Stable" and listed[group]["type"] == "Classic", listed
    assert group in {g["group"] for g in adm.ok("list", "Stable")["groups"]}
    assert group not in {g["group"] for g in adm.ok("list", "Empty,Dead")["groups"]}, "state filter ignored"
    d = adm.ok("describe", group)
    assert d["state"] == "Stable" and d["type"] == "Classic" and not d["simple"], d
    assert d["assignor"] == "range", f"Java's default strategy list starts with range: {d}"
    assert members_by_client(d) == {w.name: w.current() for w in (c1, c2)}, (
        f"described assignments {members_by_client(d)} differ from the members' callbacks {two}\n{d}")
    coord = d["coordinator"]
    assert (coord["host"], coord["port"]) == ("127.0.0.1", a.port), d
    assert coord["id"] in {nd["id"] for nd in cluster["nodes"]}, f"coordinator {coord} not in {cluster}"
    assert all(m["member_id"] and m["host"] for m in d["members"]), d
    assert admin_offsets(adm, group, topic) == {p: per for p in range(n)}

    res = adm("delete", group)
    assert not res["ok"] and res["error_class"] == "GroupNotEmptyException", (
        f"deleteConsumerGroups on a group with 2 members: {res}")
    res = adm("alter", group, topic, "0=1")
    assert not res["ok"] and res["error_class"] == "UnknownMemberIdException", (
        f"alterConsumerGroupOffsets while members are in the group: {res} (Kafka: UNKNOWN_MEMBER_ID)")
    assert admin_offsets(adm, group, topic) == {p: per for p in range(n)}, "a refused reset changed offsets"

    c1.close()
    c2.close()
    d = wait_until("the group to be Empty", lambda: (lambda d: d if d["state"] == "Empty" else None)(
        adm.ok("describe", group)), 15, lambda: str(adm("describe", group)), interval=0.3)
    assert d["members"] == [], d
    assert group in {g["group"] for g in adm.ok("list", "Empty")["groups"]}
    assert group not in {g["group"] for g in adm.ok("list", "Stable")["groups"]}

    reset = {0: 10, 1: 50, 2: 0, 3: per}
    adm.ok("alter", group, topic, ",".join(f"{p}={o}" for p, o in reset.items()))
    assert admin_offsets(adm, group, topic) == reset
    more = 5
    produce_confluent(a.bootstrap, topic, [Rec(10_000 + p * more + i, b"k", make_value(10_000 + p * more + i, 30),
                                               [], partition=p) for p in range(n) for i in range(more)])
    c3 = workers.start("adm-3", JAVA, a.bootstrap, topic, group)
    wait_committed_to([c3], {p: per + more for p in range(n)}, 40, workers)
    firsts = {}
    for e in c3.of("recs"):
        for p, o, _ in e["r"]:
            firsts.setdefault(p, o)
    assert firsts == reset, f"a new member after alterConsumerGroupOffsets started at {firsts}, reset to {reset}"
    assert not History([c3]).problems, History([c3]).problems[:10]
    c3.close()
    wait_until("the group to be Empty again",
               lambda: adm.ok("describe", group)["state"] == "Empty", 15, interval=0.3)

    adm.ok("delete-offsets", group, topic, "0")
    assert admin_offsets(adm, group, topic) == {p: per + more for p in range(1, n)}
    adm.ok("delete", group)
    assert group not in {g["group"] for g in adm.ok("list")["groups"]}, "deleted group still listed"
    assert admin_offsets(adm, group, topic) == {}, "a deleted group kept offsets"
    res = adm("delete", group)
    assert not res["ok"] and res["error_class"] == "GroupIdNotFoundException", f"second delete: {res}"
    res = adm("describe", group)
    assert (not res["ok"] and res["error_class"] == "GroupIdNotFoundException") or (
        res["ok"] and res["state"] == "Dead" and not res["members"]), f"describe of a deleted group: {res}"


def test_mixed_clients_one_group(start_agent, workers, java_admin):
    a = start_agent(extra_args=GROUP_ARGS)
    n = 6
    topic, group = unique_topic("grp-mixed"), unique_topic("g-mixed")
    create_topic(a.bootstrap, topic, n)
    adm = java_admin(a.bootstrap)
    with producing(StreamProducer(a.bootstrap, topic, partitions=n, rate_per_sec=200)) as prod:
        prod.wait_acked(60, 30, "records before the first member joins")
        jm = workers.start("mix-java", JAVA, a.bootstrap, topic, group, assignor="range")
        wait_converged([jm], n, 40, "the Java member", workers)
        gm = workers.start("mix-go", GO, a.bootstrap, topic, group, assignor="range")
        two, t = wait_converged([jm, gm], n, 40, "a Java and a franz-go member", workers)
        print(f"\nrebalance time for the franz-go member: {t - gm.first('subscribed')['t']:.2f} s "
              f"{ {k: sorted(v) for k, v in two.items()} }")
        assert sorted(tuple(sorted(v)) for v in two.values()) == [(0, 1, 2), (3, 4, 5)], (
            f"range over 2 members gives contiguous halves: {two}")
        members = [jm, gm]
        wait_all_committed_after(members, t, workers)
        d = adm.ok("describe", group)
        assert d["state"] == "Stable" and d["assignor"] == "range", d
        assert members_by_client(d) == {w.name: w.current() for w in members}, d

        t_close = time.monotonic()
        gm.close()
        _, t = wait_converged([jm], n, 20, "the Java member after franz-go closed", workers)
        assert t - t_close < SESSION_S, (
            f"reassignment after franz-go's clean close took {t - t_close:.1f}s\n{workers.diag()}")
        prod.wait_acked(prod.acked_count() + 200, 30, "records for the Java member alone")
        acked = finish_producing(prod)

    hw = high_watermarks(a.bootstrap, topic, n, acked)
    wait_committed_to(members, hw, 30, workers)
    check_group_history(members, acked, {}, allow_dups=False)
    assert admin_offsets(adm, group, topic) == hw
