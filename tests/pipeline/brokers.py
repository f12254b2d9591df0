"""The broker the integration tests run on: Apache Kafka or the embedded Tansu.

CANONFLOW_TEST_BROKER chooses: "kafka" (what `make test` uses where java and mvn are
installed) or "tansu" (the default of a plain `pytest`, and the smoke set of tests
marked `tansu`). Tansu starts in milliseconds, so a test gets one of its own. Kafka
takes seconds, so each pytest process starts one Kafka, on first use, and a test gets
it with every topic deleted (topics are named by the catalog, the same in every
test); each test has consumer groups of its own (its app id), whose committed offsets
Kafka drops with the topics.
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


@contextlib.contextmanager
def fresh_broker(log_dir: Path, engine: str = ENGINE) -> Iterator[Broker]:
    """A broker with no topic on it: a Tansu of its own, or this process's Kafka."""
    if engine == "kafka":
        kafka = shared_kafka(log_dir)
        asyncio.run(_delete_topics(kafka.bootstrap))
        yield kafka
        return
    with EmbeddedBroker(log_path=str(log_dir / "tansu.log")) as b:
        yield b


def on_broker(settings: Settings, broker: Broker) -> Settings:
    """`settings` for a worker on `broker` (Tansu's own settings on Tansu only)."""
    return embedded_settings(settings, broker.url, engine=broker.engine)
