# What this proves: a stateful Kafka Streams 4.2.0 application runs on
# rutomq with at_least_once and with exactly_once_v2, and survives losing one
# of its two instances under load. Its topology (tests/streams/.../
# StreamsStateful.java) has a KStream-KTable join (the table's store restored
# from its compacted source topic), a groupBy + count (a repartition topic
# and a compacted changelog) and a windowed count (a compact,delete
# changelog), with record caches off so that every count update is output.
# Two instances, each talking to its own agent of one cluster, process the
# input; one is SIGKILLed mid-stream, its tasks move to the other, which
# restores their counts from the changelogs and finishes the input. Then:
#  - exactly_once_v2: for read_committed consumers every count's updates are
#    exactly 1, 2, ..., n (n the events of that region, or of that user in
#    that window): nothing lost, nothing counted twice, no state reset;
#  - at_least_once: every count's last update is at least n (state restored,
#    nothing lost; reprocessed records may count twice);
#  - the changelog topics Streams created carry its cleanup policies, and
#    rutomq's compactor works on them.
# How: confluent-kafka produces the users table (two values per user, the
# first superseded; partition = user % 4 so the table and the events are
# co-partitioned), then, while the instances run, 12000 events at 1000/s
# (event times 2 ms apart: three 10 s windows); the instances run as subprocesses (test_streams.StreamsApp); the
# outputs are read with group-less consumers until every count reached n.

import threading
import time

import pytest

from kafkautil import Rec, create_topic, produce_confluent, unique_topic, wait_until
from test_streams import PARTITIONS, read_all, streams, streams_jar  # noqa: F401 (fixtures)

USERS = 100
REGIONS = 7
EVENTS = 12000
DELAY_US = 500  # per event: one instance keeps up with EVENTS_PER_S, just
EVENTS_PER_S = 1000
WINDOW_MS = 10_000
KILL_AFTER = 3000  # events the first instance processed before it is killed
DONE_TIMEOUT_S = 120  # from the kill: session timeout, restore, transaction timeout, the rest


def _region(j):
    return b"r%d" % (j % REGIONS)


def _expected(events):
    regions, windows = {}, {}
    for e in events:
        j = e.idx % USERS
        r = _region(j)
        regions[r] = regions.get(r, 0) + 1
        w = b"u%03d@%d" % (j, e.timestamp - e.timestamp % WINDOW_MS)
        windows[w] = windows.get(w, 0) + 1
    return regions, windows


def _updates(bootstrap, topic, isolation):
    """{key: [count, ...]} in output order (a key stays in one partition)."""
    out = {}
    for recs in read_all(bootstrap, [topic], isolation)[topic].values():
        for _, k, v in recs:
            out.setdefault(k, []).append(int(v))
    return out


def _restored_after(app, hhmmss):
    """{store: records} Streams' log says `app` restored from changelogs
    from time `hhmmss` on ("Finished restoring changelog ... to store S with
    a total number of N records")."""
    out = {}
    for ln in app.log_text().splitlines():
        if ln[:8] < hhmmss or "Finished restoring changelog" not in ln:
            continue
        store = ln.split(" to store ", 1)[1].split()[0]
        n = int(ln.split("a total number of ", 1)[1].split()[0])
        out[store] = out.get(store, 0) + n
    return out


def _topic_configs(bootstrap, topic):
    from confluent_kafka.admin import AdminClient, ConfigResource
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return {k: v.value for k, v in a.describe_configs([res])[res].result(timeout=10).items()}


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_stateful_topology_loses_an_instance(start_agent, streams, tmp_path, guarantee):
    args = ["--group-initial-rebalance-delay-ms", "300", "--compaction-interval-ms", "1000"]
    agents = [start_agent(extra_args=args), start_agent(extra_args=args)]
    bootstrap = agents[0].bootstrap
    base = unique_topic("sst")
    app_id = base + "-app"
    users, events, out_regions, out_windows = (base + s for s in ("-users", "-events", "-regions", "-windows"))
    create_topic(bootstrap, users, PARTITIONS, config={"cleanup.policy": "compact",
                                                       "min.cleanable.dirty.ratio": "0.01"})
    for t in (events, out_regions, out_windows):
        create_topic(bootstrap, t, PARTITIONS)
    now = int(time.time() * 1000)
    base_ts = now - now % WINDOW_MS - 60_000
    table = [Rec(j, b"u%03d" % j, b"old", partition=j % PARTITIONS, timestamp=base_ts - 120_000 + j)
             for j in range(USERS)]
    table += [Rec(j, b"u%03d" % j, _region(j), partition=j % PARTITIONS, timestamp=base_ts - 60_000 + j)
              for j in range(USERS)]
    produce_confluent(bootstrap, users, table)
    evs = [Rec(i, b"u%03d" % (i % USERS), b"e%d" % i, partition=(i % USERS) % PARTITIONS,
               timestamp=base_ts + 2 * i) for i in range(EVENTS)]
    want_regions, want_windows = _expected(evs)
    assert len(want_windows) == USERS * 3

    def app_args(name, agent):
        return ["stateful", "--bootstrap", agent.bootstrap, "--application-id", app_id,
                "--state-dir", str(tmp_path / name), "--guarantee", guarantee,
                "--users", users, "--events", events, "--out-regions", out_regions,
                "--out-windows", out_windows, "--delay-us", str(DELAY_US)]
    a = streams("a", app_args("a", agents[0]))
    b = streams("b", app_args("b", agents[1]))
    a.wait_running()
    b.wait_running()
    # The events arrive while the instances run (EVENTS_PER_S), as a stream
    # does: with the whole input there at once, a stream thread fetches and
    # works through the event partitions before its count tasks get
    # repartitioned records, and a kill would find no count state to move.
    failed = []

    def produce_events():
        try:
            for i in range(0, EVENTS, EVENTS_PER_S // 4):
                produce_confluent(bootstrap, events, evs[i:i + EVENTS_PER_S // 4], **{"linger.ms": 5})
                time.sleep(0.25)
        except BaseException as e:  # reported below
            failed.append(e)
    producer = threading.Thread(target=produce_events, daemon=True)
    producer.start()
    wait_until(f"a processed {KILL_AFTER} events",
               lambda: a.assert_alive() or b.assert_alive() or a.last_processed() >= KILL_AFTER,
               60, diag=a.tail)
    a.kill()
    killed_at = time.strftime("%H:%M:%S")

    isolation = "read_committed" if guarantee == "exactly_once_v2" else "read_uncommitted"

    def complete():
        b.assert_alive()
        got_r = _updates(bootstrap, out_regions, isolation)
        got_w = _updates(bootstrap, out_windows, isolation)
        return all(got_r.get(k, [0])[-1] >= n for k, n in want_regions.items()) and \
            all(got_w.get(k, [0])[-1] >= n for k, n in want_windows.items())
    producer.join(timeout=120)
    assert not failed and not producer.is_alive(), f"producing the events: {failed}"
    wait_until("every count reached its number of events", complete, DONE_TIMEOUT_S, diag=b.tail, interval=1.0)
    b.stop()

    got_r = _updates(bootstrap, out_regions, isolation)
    got_w = _updates(bootstrap, out_windows, isolation)
    assert set(got_r) == set(want_regions), "a count per region, and no other key"
    assert set(got_w) == set(want_windows), "a count per user and window, and no other key"
    if guarantee == "exactly_once_v2":
        for want, got in ((want_regions, got_r), (want_windows, got_w)):
            wrong = {k: got[k] for k, n in want.items() if got[k] != list(range(1, n + 1))}
            assert not wrong, f"updates not exactly 1..n for {len(wrong)} counts, e.g. " \
                              f"{sorted(wrong.items())[:1]}"
    else:
        for want, got in ((want_regions, got_r), (want_windows, got_w)):
            short = {k: (got[k][-1], n) for k, n in want.items() if got[k][-1] < n}
            assert not short, f"counts below their events (state lost): {sorted(short.items())[:3]}"

    assert a.last_processed() < EVENTS // 2 < b.last_processed(), "b took over a's tasks"
    restored = _restored_after(b, killed_at)
    for store in ("region-counts", "user-windows", "users"):
        assert restored.get(store, 0) > 0, f"b restored {store} from its changelog after the kill: {restored}"
    counts_cfg = _topic_configs(bootstrap, app_id + "-region-counts-changelog")
    windows_cfg = _topic_configs(bootstrap, app_id + "-user-windows-changelog")
    assert counts_cfg["cleanup.policy"] == "compact"
    assert set(windows_cfg["cleanup.policy"].split(",")) == {"compact", "delete"}
    _topic_configs(bootstrap, app_id + "-by-region-repartition")
    m = agents[0].metrics()
    m1 = agents[1].metrics()
    assert m["rutomq_compaction_passes_total"] + m1["rutomq_compaction_passes_total"] >= 1, \
        "the compactor ran on the compacted topics"
