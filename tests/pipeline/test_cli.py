"""The command line, as users run it (subprocesses of the installed entry point)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
CLI = [sys.executable, "-m", "pipeline.cli"]


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, timeout=60)


def test_replay_reads_stdin_and_dead_letters_bad_lines_without_stopping():
    good = b'{"type":"turn.started"}\n'
    r = run("replay", "--provider", "codex-exec", stdin=good + b"{not json\n" + good)
    assert r.returncode == 0
    events = [json.loads(x) for x in r.stdout.splitlines()]
    assert [e["type"] for e in events] == ["turn.started", "turn.completed", "turn.started"]
    [dead] = [json.loads(x) for x in r.stderr.splitlines() if x.startswith(b"{")]
    assert dead["errorClass"] == "MalformedRecord" and dead["offset"] == 2


def test_replay_is_byte_identical_across_runs_and_hash_seeds():
    path = str(CAPTURED / "codex-exec" / "codex-exec__reasoning.capture.jsonl")
    outs = {subprocess.run([*CLI, "replay", "-p", "codex-exec", "--format", "capture", path],
                           capture_output=True, env={"PYTHONHASHSEED": seed, "TZ": tz,
                                                     "PATH": "/usr/bin:/bin"},
                           check=True).stdout
            for seed, tz in (("1", "UTC"), ("2", "Asia/Kolkata"))}
    assert len(outs) == 1


def test_replay_include_raw_carries_the_native_message():
    r = run("replay", "-p", "codex-exec", "--include-raw", stdin=b'{"type":"turn.started"}\n')
    event = json.loads(r.stdout)
    assert event["raw"]["payload"] == {"type": "turn.started"}
    assert event["raw"]["source"] == "codex.sdk.thread-event"


def test_replay_of_an_unreadable_file_fails_clearly():
    r = run("replay", "-p", "codex-exec", "/nonexistent/file.jsonl")
    assert r.returncode != 0 and b"nonexistent" in r.stderr


def test_session_option_and_default_session_from_file_name(tmp_path):
    f = tmp_path / "my-session.jsonl"
    f.write_bytes(b'{"type":"turn.started"}\n')
    assert json.loads(run("replay", "-p", "codex-exec", str(f)).stdout)["sessionId"] == "my-session"
    assert json.loads(run("replay", "-p", "codex-exec", "-s", "S", str(f)).stdout)["sessionId"] == "S"


def test_schema_command_prints_the_committed_schema():
    committed = (Path(__file__).resolve().parents[2] / "topics" / "canonflow.schema.json").read_bytes()
    assert run("schema").stdout == committed


def test_topics_check_finds_no_drift_on_the_catalog_topics_and_finds_a_partition_count(
        settings):
    """Against the embedded broker: the topics `ensure_topics` created (the catalog's
    configuration, max.message.bytes of the event topics included) are what `topics
    check` expects; a deployment of another partition count is told apart."""
    import asyncio

    from pipeline.cluster.admin import check_topics, wanted
    from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, topic

    assert asyncio.run(check_topics(settings)) == []
    for name in (CANONICAL_TOPIC, CHAT_TOPIC):  # Kafka's default: no event is larger
        assert int(topic(name).config()["max.message.bytes"]) == 1_048_588
    drift = asyncio.run(check_topics(settings.replace(partitions=settings.partitions * 2)))
    assert {(d.topic, d.what) for d in drift} == {(t.name, "partitions")
                                                  for t in wanted(settings)}
    assert any(t.role == "changelog" for t in wanted(settings))  # the tables' too


def test_created_topics_have_a_leader_for_every_partition_when_creation_returns(broker):
    """Kafka answers CreateTopics before its broker has opened the partitions: `topics
    check` right after `topics create` called the new topics missing."""
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient

    from pipeline.settings import Settings
    from tests.pipeline.brokers import on_broker

    settings = on_broker(Settings(app_id="leaders", partitions=4), broker)
    from pipeline.worker.process import ensure_topics

    created = ensure_topics(settings)
    assert created

    async def leaders() -> dict[str, list[int]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
        await admin.start()
        try:
            return {t["topic"]: [p["leader"] for p in t["partitions"]]
                    for t in await admin.describe_topics(created)}
        finally:
            await admin.close()

    found = asyncio.run(leaders())
    assert sorted(found) == sorted(created)
    assert all(len(ls) == 4 and min(ls) >= 0 for ls in found.values()), found
