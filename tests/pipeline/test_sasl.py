"""canonflow on a Kafka whose client listener takes SASL/SCRAM-SHA-512 logins only
(KafkaBroker(scram_users=...): the users written at format time), driven by the
environment variables the deploy sets: `topics create`, `run`, `produce` and `tail`
log in and events flow; a wrong password is one line and a non-zero exit, at once,
from each of them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pipeline.cluster.kafka import SCRAM_MECHANISM, KafkaBroker
from tests.pipeline.brokers import ENGINE, TEST_KAFKA

pytestmark = [pytest.mark.broker,
              pytest.mark.skipif(ENGINE != "kafka", reason="SASL/SCRAM is Kafka's: "
                                 "the embedded Tansu takes no login")]

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "fixtures" / "captured" / "codex-exec" / \
    "codex-exec__reasoning.capture.jsonl"
PASSWORD = "scram-test-password"
#: A bound on a refused command, not a measurement: without the login check a worker
#: waited for the broker forever.
REFUSED_WITHIN = 60.0


@pytest.fixture(scope="module")
def scram_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    log = tmp_path_factory.mktemp("kafka-sasl") / "kafka.log"
    with KafkaBroker(log_path=str(log), config=TEST_KAFKA,
                     scram_users={"canonflow": PASSWORD}) as b:
        yield b


def deploy_env(broker: KafkaBroker, tmp_path: Path, password: str = PASSWORD,
               mechanism: str = SCRAM_MECHANISM) -> dict[str, str]:
    """The compose file's settings block for canonflow (x-canonflow-env), pointed at
    this broker, with the SCRAM mechanism of deploy/README's Kafka-with-SCRAM settings
    (compose's own broker takes PLAIN) and a data dir of the test's."""
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    deploy = {k: str(v) for k, v in compose["x-canonflow-env"].items()}
    assert deploy["CANONFLOW_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT"
    assert {"CANONFLOW_SASL_USERNAME", "CANONFLOW_SASL_PASSWORD"} <= set(deploy)
    deploy |= {"CANONFLOW_BROKER": broker.url, "CANONFLOW_SASL_MECHANISM": mechanism,
               "CANONFLOW_SASL_PASSWORD": password, "CANONFLOW_PARTITIONS": "2",
               "CANONFLOW_DATA_DIR": str(tmp_path / "data")}
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    return env | deploy


def canonflow(env: dict[str, str], *args: str, timeout: float = 120.0
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_topics_run_produce_and_tail_log_in_with_the_deploys_settings(scram_kafka, tmp_path):
    env = deploy_env(scram_kafka, tmp_path)
    created = canonflow(env, "topics", "create")
    assert created.returncode == 0 and "agents.canonical" in created.stdout, created.stderr
    assert canonflow(env, "topics", "check").returncode == 0
    with open(tmp_path / "run.log", "wb") as log:
        run = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", "--no-web"],
                               env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        sent = canonflow(env, "produce", "-p", "codex-exec", "-s", "sess-scram",
                         "--format", "capture", str(CAPTURE))
        assert sent.returncode == 0, sent.stderr
        tail = canonflow(env, "tail", "--json", "--session", "sess-scram", "--max", "3",
                         "--idle-timeout", "90")
        events = [json.loads(line) for line in tail.stdout.splitlines()]
        assert tail.returncode == 0 and len(events) == 3, (tail.stderr,
                                                            (tmp_path / "run.log").read_text())
        assert [e["seq"] for e in events] == [1, 2, 3]
        assert {e["sessionId"] for e in events} == {"sess-scram"}
        assert events[0]["type"] == "session.started"
    finally:
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == 0, (tmp_path / "run.log").read_text()


@pytest.mark.parametrize("command", [["topics", "create"], ["run", "--no-web"],
                                     ["tail", "--idle-timeout", "5"]])
def test_a_wrong_password_is_one_line_and_a_failure(scram_kafka, tmp_path, command):
    refused = canonflow(deploy_env(scram_kafka, tmp_path, password="not-the-password"),
                        *command, timeout=REFUSED_WITHIN)
    lines = refused.stderr.splitlines()
    assert refused.returncode == 1 and len(lines) == 1, refused.stderr[-3000:]
    assert lines[0] == (f"canonflow: the broker at {scram_kafka.bootstrap} refused the login "
                        "of user 'canonflow' (SCRAM-SHA-512 over SASL_PLAINTEXT): [Error 58] "
                        "SaslAuthenticationFailed: Authentication failed during "
                        "authentication due to invalid credentials with SASL mechanism "
                        "SCRAM-SHA-512")


def test_a_mechanism_the_broker_does_not_take_is_one_line_and_a_failure(scram_kafka, tmp_path):
    refused = canonflow(deploy_env(scram_kafka, tmp_path, mechanism="PLAIN"),
                        "topics", "create", timeout=REFUSED_WITHIN)
    assert (refused.returncode, refused.stderr) == (1, (
        f"canonflow: the broker at {scram_kafka.bootstrap} refused the login of user "
        "'canonflow' (PLAIN over SASL_PLAINTEXT): UnsupportedSaslMechanismError: The broker "
        "does not support the requested SASL mechanism.\n"))
