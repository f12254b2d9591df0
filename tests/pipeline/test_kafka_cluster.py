"""Faults on a three-broker Apache Kafka cluster, under a steady load.

One KafkaCluster for the module (three KRaft nodes, each broker and controller), the
catalog's topics created by `canonflow topics create` at replication 3 (the cluster's
min.insync.replicas is 2), and one `canonflow run --broker <all three nodes>` child
process, whose output producer sends with acks=all. A paced producer sends copies of
every captured conversation (many sessions, several providers) as raw records with a
`record-id` header, from a producer that is not idempotent: a send the cluster took but
did not answer is sent again, and the raw topic holds it twice.

Meanwhile, one after the other: kill -9 of the leader of a raw partition (restarted
after), of an agents.canonical partition's, of a session table changelog partition's,
of the active controller; SIGSTOP of a broker for 30 s, then SIGCONT; a restart of the
whole cluster. After each, the time until the first canonical event of a raw record
sent after it, on the partition it touched. At the end, agents.canonical after dedupe by eventId holds
exactly the offline replay of what was produced, session by session (nothing lost,
nothing extra, no id with two contents), and the table of faults goes to
artifacts/kafka-faults.md.

Runs on Apache Kafka only (CANONFLOW_TEST_BROKER=kafka), in `make test`'s parallel
run: it asserts counts, never times, and spends most of its time waiting on the
cluster, so the times it reports are longer there than alone.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters import MemorySpool, get, new_session
from pipeline.cluster.broker import die_with_parent
from pipeline.cluster.kafka import KafkaCluster
from pipeline.settings import Settings, child_env
from pipeline.tools.kafka_io import RawRecord
from tests.pipeline.brokers import ENGINE, TEST_KAFKA, TEST_REBALANCE_TIMEOUT
from tests.pipeline.faults import (
    Deduped,
    Observer,
    Work,
    assert_same,
    interleave,
    replay_record,
    workload,
)
from topics.catalog import CANONICAL_TOPIC, DEADLETTER_TOPIC, raw_topic
from topics.records import HEADER_RECORD

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT = ROOT / "artifacts" / "kafka-faults.md"

pytestmark = [
    pytest.mark.skipif(ENGINE != "kafka", reason="a Kafka cluster test: CANONFLOW_TEST_BROKER=kafka"),
    pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None,
                       reason="Apache Kafka needs java and mvn"),
]

#: The cluster's settings beyond KafkaCluster's: the tests' (no topic created by asking
#: for it, no retention check), a node that stops answering fenced after 5 s rather
#: than Kafka's 9 (heartbeats every second), so that leaders move within the test's
#: budget; and 6 consumer-offset partitions rather than 50, which three nodes on two
#: cores take seconds to create at the first consumer group.
CLUSTER_CONFIG = {**TEST_KAFKA, "broker.session.timeout.ms": "5000",
                  "broker.heartbeat.interval.ms": "1000", "offsets.topic.num.partitions": "6"}
PARTITIONS = 4
#: The provider whose raw topic carries the most records of the workload: the raw and
#: changelog partitions whose leaders are killed are its.
BUSIEST = "opencode"
#: The load: CHUNK records every PAUSE seconds (at most 40 a second) until the faults are
#: over; the workload is larger than what is sent, and the oracle replays what was.
CHUNK, PAUSE = 10, 0.25
#: How long a broker stays stopped (SIGSTOP) before SIGCONT.
STOPPED_SECONDS = 30.0
#: The stream name of the load's record ids: `<stream>:<n>`, n its place in the load.
STREAM = "cluster-load"


class Load:
    """The paced producer: (topic, key, record) items handed to the producer CHUNK at a
    time, PAUSE seconds apart, until `stop`, with acks=all and without idempotence. It
    does not wait for one chunk's delivery before the next, so that a partition whose
    leader is gone holds back only its own records. aiokafka retries a send the cluster
    does not answer (one request in flight per partition, so records keep their order),
    and its delivery timeout is longer than any fault here: no record is given up.
    `sent` counts the records handed over; `delivered()` waits for all of them."""

    def __init__(self, bootstrap: str, items: list[tuple[str, bytes, RawRecord]]):
        self.bootstrap, self.items = bootstrap, items
        self.sent = 0
        self.stop = False
        self._deliveries: list[asyncio.Future[Any]] = []
        self._producer: Any = None

    async def run(self) -> None:
        from aiokafka import AIOKafkaProducer

        self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all",
                                          linger_ms=5, request_timeout_ms=120_000,
                                          metadata_max_age_ms=1000)
        await self._producer.start()
        while not self.stop and self.sent < len(self.items):
            for topic, key, r in self.items[self.sent:self.sent + CHUNK]:
                self._deliveries.append(await self._producer.send(
                    topic, r.value, key=key, headers=r.headers(), timestamp_ms=r.t))
                self.sent += 1
            await asyncio.sleep(PAUSE)

    async def delivered(self) -> None:
        """Wait until every record handed over is delivered, then stop the producer.
        Raises the producer's error for a record it could not deliver."""
        try:
            await asyncio.gather(*self._deliveries)
        finally:
            await self.close()

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()


class Watch(Observer):
    """The output topics read from the beginning for the whole test (faults.Observer),
    with fetches that time out after 10 s, so that a stopped broker holds it back no
    longer than that."""

    def __init__(self, settings: Settings, topics: list[str]):
        super().__init__(settings, topics, request_timeout_ms=10_000)

    @property
    def ids(self) -> set[str]:
        """The distinct eventIds seen on agents.canonical."""
        return self._ids[CANONICAL_TOPIC]

    async def flowing(self, since: int, sent: int, origin: dict[str, int],
                      partition: int | None, timeout: float, alive: Callable[[], bool]
                      ) -> float:
        """When the first canonical event came, after the `since`-th record, that comes
        from a raw record sent after the first `sent` (`origin`: the place in the load
        of each event's record), on `partition` (any when None): output of input sent
        after a fault, not output already on its way. Raises AssertionError after
        `timeout` seconds or when `alive()` fails."""
        canonical = self.records[CANONICAL_TOPIC]
        deadline, at = time.monotonic() + timeout, since
        while True:
            for i in range(at, len(canonical)):
                r = canonical[i]
                if (partition is None or r.partition == partition) and \
                        origin.get(json.loads(r.value)["eventId"], -1) >= sent:
                    return self.came[i]
            at = len(canonical)
            assert alive(), "the worker died"
            assert time.monotonic() < deadline, \
                f"no new canonical event on partition {partition} for {timeout:.0f} s"
            await asyncio.sleep(0.05)


class Fault:
    """One fault of the sequence, and what it did."""

    def __init__(self, name: str, node: int, partition: int | None):
        self.name, self.node, self.partition = name, node, partition
        self.at = 0.0  # when it was injected (monotonic)
        self.flowing = 0.0  # seconds until the first new canonical event after it
        self.first_record = 0  # the first load item sent after it
        self.first_output = 0  # the first canonical record that came after it


class Run:
    """What the module's run left: the faults, the load sent, every record seen; and the
    offline replay of the whole load, each event with the place in the load of the
    record it comes from (`origin`)."""

    def __init__(self, work: list[Work], items: list[tuple[str, bytes, RawRecord]]):
        self.work, self.items = work, items
        self.replay, self.origin = _replay(work, items)
        self.faults: list[Fault] = []
        self.notes: list[str] = []  # what happened when, seconds from the worker's start
        self.sent = 0
        self.canonical: list[Any] = []
        self.raw: list[Any] = []
        self.deadletters: list[Any] = []
        self.seconds = 0.0


def _load_items(work: list[Work]) -> list[tuple[str, bytes, RawRecord]]:
    """The workload round-robin over its sessions, each record with its record id."""
    return [(topic, key, RawRecord(r.value, r.origin, r.t, f"{STREAM}:{n}"))
            for n, (topic, key, r) in enumerate(interleave(work))]


def _worker(settings: Settings, url: str, log: Path) -> subprocess.Popen[bytes]:
    """`canonflow run --broker <url>`, its settings otherwise from the environment."""
    env = child_env(settings)
    del env["CANONFLOW_BROKER"]
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", "--broker", url],
                                cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent())


def _canonflow(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)


async def _settled(cluster: KafkaCluster, timeout: float = 90.0) -> None:
    """Until every partition has all its replicas in sync again (a node restarted has
    caught up), so that the next fault leaves two in sync."""
    deadline = time.monotonic() + timeout
    while (lagging := await asyncio.to_thread(cluster.under_replicated)):
        assert time.monotonic() < deadline, f"{lagging} partitions still under-replicated"
        await asyncio.sleep(0.5)


async def _faults(cluster: KafkaCluster, settings: Settings, run: Run, logs: Path) -> None:
    raw = raw_topic(BUSIEST)
    changelog = f"{settings.app_id}-sessions.{BUSIEST}-changelog"
    watch = await Watch(settings, [CANONICAL_TOPIC, DEADLETTER_TOPIC]).start()
    load = Load(cluster.bootstrap, run.items)
    loading = asyncio.ensure_future(load.run())
    worker = _worker(settings, cluster.url, logs / "worker.log")
    t0 = time.monotonic()

    def alive() -> bool:
        if loading.done() and not load.stop:
            loading.result()  # the load's error, if it failed
            raise AssertionError("the load ran out before the faults were over")
        return worker.poll() is None

    def note(what: str) -> None:
        run.notes.append(f"{time.monotonic() - t0:.1f}s {what} ({load.sent} sent, "
                         f"{len(watch.ids)} events out)")

    async def inject(name: str, node: int, partition: int | None,
                     act: Callable[[], Any]) -> Fault:
        fault = Fault(name, node, partition)
        fault.first_record, fault.first_output = load.sent, len(watch.records[CANONICAL_TOPIC])
        fault.at = time.monotonic()
        await asyncio.to_thread(act)
        run.faults.append(fault)
        note(f"{name}: node {node}")
        return fault

    async def restarted(fault: Fault) -> None:
        """The killed node started again at once (its partitions' leaders have moved by
        the time it is back), the output's flow measured meanwhile; then until every
        partition is in sync again."""
        restart = asyncio.ensure_future(asyncio.to_thread(cluster.restart, fault.node))
        await flows(fault)
        await restart
        note(f"node {fault.node} restarted")
        await _settled(cluster)
        note("in sync")

    async def flows(fault: Fault, timeout: float = 120.0) -> None:
        fault.flowing = await watch.flowing(fault.first_output, fault.first_record,
                                            run.origin, fault.partition, timeout,
                                            alive) - fault.at
        note(f"flowing again after {fault.flowing:.1f} s")

    try:
        await watch.flowing(0, 0, run.origin, None, 180, alive)  # the worker translates
        note("first output")
        # 1-3: kill -9 the leader of a partition of a raw topic, of agents.canonical and
        # of a session table's changelog; each measured on that partition, restarted after
        for n, (what, topic) in enumerate([("raw", raw), ("canonical", CANONICAL_TOPIC),
                                           ("changelog", changelog)]):
            part = n % PARTITIONS
            node = await asyncio.to_thread(cluster.leader, topic, part)
            fault = await inject(f"kill -9 the leader of {topic} [{part}] ({what})", node,
                                 part, lambda node=node: cluster.kill(node))
            await restarted(fault)
        # 4: kill -9 the active controller (a broker too: measured on a partition it led)
        node = await asyncio.to_thread(cluster.controller)
        led = [p for p in range(PARTITIONS)
               if await asyncio.to_thread(cluster.leader, CANONICAL_TOPIC, p) == node]
        fault = await inject("kill -9 the active controller", node, led[0] if led else None,
                             lambda: cluster.kill(node))
        await restarted(fault)
        now = await asyncio.to_thread(cluster.controller)
        assert now != node, f"node {node}, killed, still leads the quorum"
        note(f"node {now} is the active controller")
        # 5: SIGSTOP the leader of a canonical partition for 30 s, then SIGCONT
        part = 3
        node = await asyncio.to_thread(cluster.leader, CANONICAL_TOPIC, part)
        fault = await inject(f"SIGSTOP the leader of {CANONICAL_TOPIC} [{part}] for "
                             f"{STOPPED_SECONDS:.0f} s", node, part, lambda: cluster.pause(node))
        stopped = asyncio.ensure_future(flows(fault, timeout=STOPPED_SECONDS + 120))
        await asyncio.sleep(STOPPED_SECONDS)
        await asyncio.to_thread(cluster.resume, node)
        note(f"node {node} resumed")
        await stopped
        await _settled(cluster)
        note("in sync")
        # 6: every node stopped (SIGTERM, all at once) and started again; measured from
        # the moment all three are down
        await asyncio.to_thread(cluster.stop_all)
        note("all nodes stopped")
        fault = await inject("restart the whole cluster", 0, None, cluster.start_all)
        await flows(fault)
        await asyncio.sleep(2.0)  # the load goes on a little after the last fault
        load.stop = True
        await loading
        await load.delivered()
        run.sent = load.sent
        note("every record of the load delivered")
        expected = sum(len(evs) for evs in _expected(run).values())
        deadline = time.monotonic() + 120
        while len(watch.ids) < expected and time.monotonic() < deadline:
            assert worker.poll() is None, "the worker died"
            await asyncio.sleep(0.1)
        note(f"{len(watch.ids)} of {expected} expected events out")
        await asyncio.sleep(1.5)  # records beyond the expected would come now
        run.seconds = time.monotonic() - t0
    finally:
        load.stop = True
        if not loading.done():
            loading.cancel()
        await load.close()
        await watch.stop()
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    run.canonical = watch.records[CANONICAL_TOPIC]
    run.deadletters = watch.records[DEADLETTER_TOPIC]
    run.raw = await _read_all(cluster.bootstrap, sorted({t for t, _, _ in run.items}))


async def _read_all(bootstrap: str, topics: list[str]) -> list[Any]:
    """Every record of `topics`, from the beginning to their end now."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        out: list[Any] = []
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            for recs in (await consumer.getmany(timeout_ms=500, max_records=50_000)).values():
                out.extend(recs)
        return out
    finally:
        await consumer.stop()


def _replay(work: list[Work], items: list[tuple[str, bytes, RawRecord]]
            ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """The offline replay of `items` (record by record, as the worker splits them),
    session by session; and for each eventId the place in `items` of its record."""
    providers = {w.session_id: w.provider for w in work}
    sessions: dict[str, tuple[Any, MemorySpool, int]] = {}
    events: dict[str, list[dict[str, Any]]] = {}
    origin: dict[str, int] = {}
    for n, (_, key, record) in enumerate(items):
        sid = key.decode()
        state, spool, count = sessions.get(sid) or (
            new_session(get(providers[sid])), MemorySpool(), 0)
        state, evs, failed = replay_record(providers[sid], state, sid, record, count, spool)
        assert failed == 0, f"{sid} record {count} does not translate offline"
        sessions[sid] = (state, spool, count + 1)
        for e in evs:
            event = json.loads(e)
            events.setdefault(sid, []).append(event)
            origin[event["eventId"]] = n
    return events, origin


def _expected(run: Run) -> dict[str, list[dict[str, Any]]]:
    """The replay of the records sent (a record's events depend on it and the records
    before it only)."""
    out = {sid: [e for e in evs if run.origin[e["eventId"]] < run.sent]
           for sid, evs in run.replay.items()}
    return {sid: evs for sid, evs in out.items() if evs}


def _table(run: Run) -> str:
    """The markdown table of faults: per fault, the time until output flowed again, the
    expected events lost whose record was sent during its window, the canonical records
    that came during its window twice (before dedupe) and the events left that the replay
    does not have (after dedupe), and the raw records sent during its window twice."""
    events, origin = _expected(run), {k: n for k, n in run.origin.items() if n < run.sent}
    got = {json.loads(r.value)["eventId"] for r in run.canonical}
    deduped = Deduped(run.canonical, "eventId")
    extra = {e["eventId"] for evs in deduped.sessions.values() for e in evs} - set(origin)
    bad = extra | set(deduped.conflicts)
    rids = Counter(dict(run_headers(r))[HEADER_RECORD] for r in run.raw)
    raw_twice = Counter(int(rid.rpartition(":")[2]) for rid, k in rids.items() for _ in range(k - 1))
    windows = [(0, 0, "none yet: the load before the first fault")] + \
              [(f.first_record, f.first_output, f.name) for f in run.faults]
    rows = ["| fault | node | time to flow again | events lost | canonical duplicates "
            "before dedupe | after dedupe | raw records sent twice |",
            "|---|---|---|---|---|---|---|"]
    seen: set[str] = set()
    ends = [(w[0], w[1]) for w in windows[1:]] + [(run.sent, len(run.canonical))]
    for (first_rec, first_out, name), (end_rec, end_out), fault in zip(
            windows, ends, [None, *run.faults], strict=True):
        lost = sum(1 for eid, n in origin.items() if first_rec <= n < end_rec and eid not in got)
        dupes = after = 0
        for r in run.canonical[first_out:end_out]:
            eid = json.loads(r.value)["eventId"]
            if eid in seen:
                dupes += 1
            else:
                after += eid in bad
            seen.add(eid)
        raw = sum(k for n, k in raw_twice.items() if first_rec <= n < end_rec)
        flow = f"{fault.flowing:.1f} s" if fault else "-"
        node = ("all" if fault.node == 0 else str(fault.node)) if fault else "-"
        rows.append(f"| {name} | {node} | {flow} | {lost} | {dupes} | {after} | {raw} |")
    total_lost = sum(1 for eid in origin if eid not in got)
    rows.append(f"| **all** ({run.sent} raw records, {len(events)} sessions, "
                f"{run.seconds:.0f} s) | | | {total_lost} | {deduped.duplicates} | {len(bad)} | "
                f"{sum(raw_twice.values())} |")
    return "\n".join(rows) + "\n"


def _rss_mib(pid: int | None) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) // 1024


def run_headers(record: Any) -> list[tuple[str, str]]:
    return [(k, v.decode()) for k, v in record.headers]


@pytest.fixture(scope="module")
def faulted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    logs = tmp_path_factory.mktemp("kafka-cluster")
    work = workload(8000, prefix="cluster")
    run = Run(work, _load_items(work))
    providers = tuple(sorted({w.provider for w in work}))
    for name in ("aiokafka", "kafka"):  # a killed node's refused connections, by the hundred
        logging.getLogger(name).setLevel(logging.CRITICAL)
    t0 = time.monotonic()
    with KafkaCluster(config=CLUSTER_CONFIG, log_dir=str(logs)) as cluster:
        run.notes.append(f"cluster up in {time.monotonic() - t0:.1f}s (logs in {logs})")
        settings = Settings(broker=cluster.url, broker_kind="kafka", app_id="cluster",
                            partitions=PARTITIONS, replication=3, providers=providers,
                            stall_model=0, stall_tool=0, stall_approval=0,
                            web_enabled=False, data_dir=str(logs / "data"), log_level="info",
                            rebalance_timeout=TEST_REBALANCE_TIMEOUT)
        created = _canonflow(child_env(settings), "topics", "create", "--broker", cluster.url,
                             "--partitions", str(PARTITIONS))
        assert created.returncode == 0, created.stdout + created.stderr
        run.notes.append(f"topics created at {time.monotonic() - t0:.1f}s")
        asyncio.run(_faults(cluster, settings, run, logs))
        run.notes.append("resident MiB per node at the end: " + ", ".join(
            f"{n.node_id}: {_rss_mib(n.pid)}" for n in cluster.nodes.values()))
    yield run


def test_faults_on_a_three_broker_cluster_lose_no_canonical_event(faulted: Run, capsys):
    table = _table(faulted)
    ARTIFACT.parent.mkdir(exist_ok=True)
    ARTIFACT.write_text("# Faults on a three-broker Kafka cluster\n\n" + table)
    with capsys.disabled():
        print("\n" + "\n".join(faulted.notes) + "\n\n" + table)
    assert len(faulted.faults) == 6
    assert_same(Deduped(faulted.canonical, "eventId"), _expected(faulted), "agents.canonical")
    assert faulted.deadletters == []


def test_every_raw_record_sent_is_on_its_topic(faulted: Run):
    """acks=all with two replicas in sync: a record the cluster acknowledged survives the
    loss of its leader."""
    have = {dict(run_headers(r))[HEADER_RECORD] for r in faulted.raw}
    missing = [f"{STREAM}:{n}" for n in range(faulted.sent) if f"{STREAM}:{n}" not in have]
    assert not missing, f"{len(missing)} acknowledged raw records gone, e.g. {missing[:3]}"
