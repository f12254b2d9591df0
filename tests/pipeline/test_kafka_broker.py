"""Apache Kafka one command away: `canonflow broker --engine kafka` (pipeline.cluster.kafka)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.cluster.broker import EMBEDDED_CLUSTER_ID, die_with_parent
from pipeline.cluster.kafka import kafka_version
from pipeline.settings import Settings
from pipeline.worker.process import embedded_settings, for_cluster

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None,
                                reason="Apache Kafka needs java and mvn")


def canonflow(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)


async def _cluster(url: str) -> tuple[dict[str, Any], dict[str, str]]:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=url[len("kafka://"):])
    await admin.start()
    try:
        cluster = await admin.describe_cluster()
        [resp] = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")])
        return cluster, {e[0]: e[1] for res in resp.resources for e in res[4]}
    finally:
        await admin.close()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_canonflow_broker_engine_kafka_runs_apache_kafka_with_its_defaults_until_ctrl_c():
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "broker", "--engine", "kafka"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=die_with_parent())
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"canonflow: Apache Kafka {kafka_version()} at kafka://127.0.0.1:"), \
            (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        url = "kafka://" + line.split("kafka://")[1].split()[0]
        java = int(line.split("(pid ")[1].split(",")[0])
        cluster, config = asyncio.run(_cluster(url))
        assert [b["node_id"] for b in cluster["brokers"]] == [1]
        assert cluster["cluster_id"] != EMBEDDED_CLUSTER_ID
        # Kafka's default record size limit, not one raised for canonflow
        assert config["message.max.bytes"] == "1048588"
        assert config["offsets.topic.replication.factor"] == "1"
        # a worker pointed at it takes none of the embedded Tansu's settings
        live = asyncio.run(for_cluster(Settings(broker=url)))
        assert live.broker_kind == "kafka" and live.producer_max_batch_size is None
        assert canonflow("topics", "create", "--broker", url).returncode == 0
        check = canonflow("topics", "check", "--broker", url)
        assert check.returncode == 0, check.stdout + check.stderr
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        assert _gone(java), f"java {java} outlived `canonflow broker`"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_embedded_settings_of_a_kafka_broker_are_kafkas_own():
    s = Settings(rebalance_timeout=60.0)
    kafka = embedded_settings(s, "kafka://127.0.0.1:9", engine="kafka")
    assert (kafka.broker, kafka.broker_kind) == ("kafka://127.0.0.1:9", "kafka")
    assert kafka.producer_max_batch_size is None and kafka.rebalance_timeout == 60.0
    tansu = embedded_settings(s, "kafka://127.0.0.1:9")
    assert tansu.broker_kind == "tansu" and tansu.producer_max_batch_size == 1
