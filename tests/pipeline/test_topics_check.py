"""`canonflow topics create` then `topics check` against the configuration the broker
reports (DescribeConfigs): a fresh create agrees with the catalog; a topic whose live
configuration someone changed afterwards (with the admin client) is drift, exit 1."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.cluster.admin import kafka_client_kwargs
from pipeline.settings import Settings
from tests.pipeline.brokers import ENGINE
from topics.catalog import CATALOG, SESSIONS_TOPIC

pytestmark = [pytest.mark.broker, pytest.mark.partitions(2),
              pytest.mark.skipif(ENGINE != "kafka", reason="altering a topic's configuration "
                                 "is Kafka's: the embedded Tansu serves no AlterConfigs")]

ROOT = Path(__file__).resolve().parents[2]


def topics(broker_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    env |= {"CANONFLOW_APP_ID": "topics-check", "CANONFLOW_PARTITIONS": "2"}
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "topics", *args,
                           "--broker", broker_url], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


async def _alter(bootstrap: str, topic: str, config: dict[str, str],
                 timeout: float = 30.0) -> None:
    """Set the topic's dynamic configuration to `config` (AlterConfigs replaces it all),
    and wait until the broker describes it so: Kafka answers AlterConfigs once its
    controller has recorded the change, and the broker applies it a moment later
    (measured: 1 to 2 s under the test suite's load)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(**kafka_client_kwargs(Settings(broker=bootstrap)))
    await admin.start()
    try:
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, config)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            [described] = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic)])
            live = {e[0]: e[1] for e in described.resources[0][4]}
            if all(live.get(k) == v for k, v in config.items()):
                return
            await asyncio.sleep(0.2)
        raise AssertionError(f"{topic}: the broker never described {config}")
    finally:
        await admin.close()


def test_check_passes_on_a_fresh_create_and_reports_a_changed_cleanup_policy(broker):
    created = topics(broker.url, "create")
    assert created.returncode == 0 and SESSIONS_TOPIC in created.stdout, created.stderr
    agree = topics(broker.url, "check")
    assert (agree.returncode, agree.stdout) == (0, "catalog and cluster agree\n"), agree.stderr

    spec = next(t for t in CATALOG if t.name == SESSIONS_TOPIC)
    asyncio.run(_alter(broker.bootstrap, SESSIONS_TOPIC,
                       spec.config() | {"cleanup.policy": "delete"}))
    drift = topics(broker.url, "check")
    assert drift.returncode == 1, (drift.stdout, drift.stderr)
    assert drift.stdout.splitlines() == [
        f"DRIFT {SESSIONS_TOPIC}: cleanup.policy is delete, expected compact"]
