"""The broker the integration tests run on: Apache Kafka or the embedded Tansu.

CANONFLOW_TEST_BROKER chooses: "kafka" (what `make test` uses where java and mvn are
installed) or "tansu" (the default of a plain `pytest`, and the smoke set of tests
marked `tansu`). Tansu starts in milliseconds, so a test gets one of its own. Kafka
takes seconds, so each pytest process starts one Kafka, on first use, and a test gets
it with no record a test before it wrote (topics are named by the catalog, the same in
every test; each test has consumer groups and table changelogs of its own, named by
its app id).

Emptying that Kafka by deleting its topics cost 1.2-1.8 s a test, growing with the
partitions (the broker closes and renames each partition's log: about 6 ms each, 220
partitions for the catalog and one worker's changelogs at 4 partitions). So a catalog
topic that a test may reuse as it is (the partition count the test asks for, the
catalog's configuration, a cleanup policy with `delete`) is emptied instead, with
DeleteRecords up to its end: readers from the earliest offset then start after
everything written before. Every other topic is deleted: a compacted catalog topic
(Kafka refuses DeleteRecords there), one with other partitions or configuration (the
test then creates it anew), and the previous tests' changelogs and Faust's internal
topics, named by app ids no later test uses (deleted without waiting for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from pipeline.cluster.broker import EmbeddedBroker
from pipeline.cluster.kafka import KafkaBroker
from pipeline.settings import Settings
from pipeline.worker.process import embedded_settings
from topics.catalog import CATALOG

ENGINES = ("tansu", "kafka")
ENGINE = os.environ.get("CANONFLOW_TEST_BROKER", "") or "tansu"
if ENGINE not in ENGINES:
    raise RuntimeError(f"CANONFLOW_TEST_BROKER={ENGINE!r}: use one of {', '.join(ENGINES)}")

Broker = EmbeddedBroker | KafkaBroker
#: The tests' rebalance timeout (seconds), and with it the consumer session timeout
#: (pipeline.worker.app: at least 10 s): a test that kills a worker with SIGKILL waits
#: that long before another worker takes its partitions. Tansu's embedded settings
#: make it 3 (a 10 s session); on Kafka the worker's default (60) would have such a
#: test wait a minute for the dead member.
TEST_REBALANCE_TIMEOUT = 10.0
#: The tests' Kafka settings beyond KafkaBroker's. No topic is created by asking for it:
#: a client of the test before still asking for a topic just deleted would create it
#: again with one partition, before the next test creates the catalog's. And no
#: retention check (the first comes 30 s after start, then every 5 minutes): the tests
#: replay captures with their recorded times, older than the topics' retention.ms (3
#: days raw, 7 days canonical), and the worker's events carry them: Kafka would delete
#: those records under the tests.
DAY_MS = str(24 * 3600 * 1000)
TEST_KAFKA = {"auto.create.topics.enable": "false",
              "log.initial.task.delay.ms": DAY_MS, "log.retention.check.interval.ms": DAY_MS}
_kafka: KafkaBroker | None = None
_CATALOG = {spec.name: spec for spec in CATALOG}


def shared_kafka(log_dir: Path) -> KafkaBroker:
    """This process's Kafka, started on first use (its log in `log_dir`), stopped by
    stop_shared_kafka at the end of the session, or at exit."""
    global _kafka
    if _kafka is None or _kafka.proc is None or _kafka.proc.poll() is not None:
        if _kafka is not None:
            _kafka.stop()
        _kafka = KafkaBroker(log_path=str(log_dir / "kafka.log"), config=TEST_KAFKA).start()
    return _kafka


def stop_shared_kafka() -> None:
    global _kafka
    if _kafka is not None:
        _kafka.stop()
        _kafka = None


async def _delete_topics(bootstrap: str, timeout: float = 60.0) -> None:
    """Delete every topic but Kafka's own from the Kafka at `bootstrap`, and wait until
    they are gone."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        deadline = time.monotonic() + timeout
        while True:
            names = [t for t in await admin.list_topics() if not t.startswith("__")]
            if not names:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kafka did not delete {names}")
            with contextlib.suppress(Exception):  # already going: listed again until gone
                await admin.delete_topics(names)
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def _reset_topics(bootstrap: str, partitions: int, timeout: float = 60.0) -> None:
    """Leave no record of an earlier test on the Kafka at `bootstrap` (module docstring)."""
    from aiokafka import TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.errors import KafkaError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        listed = {t["topic"]: t for t in await admin.describe_topics()
                  if not t["topic"].startswith("__")}
        reusable = [n for n, t in listed.items()
                    if n in _CATALOG and "delete" in _CATALOG[n].cleanup_policy
                    and len(t["partitions"]) == partitions]
        if reusable:
            described = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, n) for n in reusable])
            live = {r[3]: {c[0]: c[1] for c in r[4]}
                    for response in described for r in response.resources}
            reusable = [n for n in reusable
                        if all(live.get(n, {}).get(k) == v
                               for k, v in _CATALOG[n].config().items())]
        if reusable:
            try:
                await admin.delete_records(
                    {TopicPartition(n, p["partition"]): RecordsToDelete(-1)
                     for n in reusable for p in listed[n]["partitions"]}, timeout_ms=30_000)
            except KafkaError:  # a partition without a leader (a test just took it down)
                reusable = []
        doomed = [n for n in listed if n not in reusable]
        if doomed:
            await admin.delete_topics(doomed)
        # a catalog topic must be gone before the test creates it again; the rest go
        # while the test runs
        waited = [n for n in doomed if n in _CATALOG]
        deadline = time.monotonic() + timeout
        while waited:
            left = set(waited) & set(await admin.list_topics())
            if not left:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kafka did not delete {sorted(left)}")
            await asyncio.sleep(0.05)
    finally:
        await admin.close()


@contextlib.contextmanager
def fresh_broker(log_dir: Path, engine: str = ENGINE, partitions: int = 4,
                 reuse: bool = True) -> Iterator[Broker]:
    """A broker with no record on it: a Tansu of its own, or this process's Kafka with
    the catalog's topics empty where they have `partitions` partitions, else gone. With
    `reuse` false, every topic is gone (a test that needs offsets from 0)."""
    if engine == "kafka":
        kafka = shared_kafka(log_dir)
        asyncio.run(_reset_topics(kafka.bootstrap, partitions) if reuse
                    else _delete_topics(kafka.bootstrap))
        yield kafka
        return
    with EmbeddedBroker(log_path=str(log_dir / "tansu.log")) as b:
        yield b


def on_broker(settings: Settings, broker: Broker) -> Settings:
    """`settings` for a worker on `broker` (Tansu's own settings on Tansu only)."""
    return embedded_settings(settings, broker.url, engine=broker.engine)
