"""End to end through a real broker: raw topic -> worker -> canonical topic. The
`tansu` smoke set: `make test` runs it on Apache Kafka and on the embedded Tansu."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pipeline.privacy.redact import Redactor
from pipeline.tools.kafka_io import RawRecord, produce, records_from_file
from pipeline.tools.replay import Replayer, iter_lines
from pipeline.worker.process import WorkerProcess
from tests.pipeline.conftest import decoded, read_topic, timed
from topics.catalog import CANONICAL_TOPIC, DEADLETTER_TOPIC
from topics.records import decode_deadletter

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"

pytestmark = pytest.mark.tansu


def _offline(provider: str, session: str, path: Path) -> list[dict]:
    """The events `canonflow replay` gives, published as the worker publishes them (its
    default redaction)."""
    rep, out = Replayer(provider), []
    publish = Redactor.from_env({}).publisher()
    with open(path, "rb") as fh:
        for offset, raw in iter_lines(fh):
            out += [json.loads(publish(e)[0]) for e in rep.feed(session, offset, raw, "capture")[0]]
    return out


def test_worker_translates_a_real_capture_exactly_as_replay_does(settings, worker, tmp_path):
    path = timed(CAPTURED / "codex-exec" / "codex-exec__reasoning.capture.jsonl", tmp_path)
    expected = _offline("codex-exec", "sess-real", path)
    asyncio.run(produce(settings, "codex-exec", "sess-real",
                        records_from_file(str(path), "capture")))
    got = decoded(read_topic(settings, CANONICAL_TOPIC, len(expected), key=b"sess-real",
                                worker=worker))
    assert got == expected


def test_the_worker_and_replay_cut_an_item_past_the_cap_alike(settings, tmp_path, monkeypatch):
    """CANONFLOW_ITEM_CAP reaches replay as it reaches the worker. Replay ignored it, so
    with a cap set the two told a long item's completion differently."""
    monkeypatch.setenv("CANONFLOW_ITEM_CAP", "16")
    path = timed(CAPTURED / "acp" / "acp-gemini__text.capture.jsonl", tmp_path)
    expected = _offline("acp", "sess-cap", path)
    cut = [e["payload"] for e in expected if e["payload"].get("textTruncated")]
    assert cut and all(p["textLength"] > 16 for p in cut)
    worker = WorkerProcess(settings.replace(item_cap=16),
                           log_path=str(tmp_path / "worker.log")).start()
    try:
        asyncio.run(produce(settings, "acp", "sess-cap", records_from_file(str(path), "capture")))
        got = decoded(read_topic(settings, CANONICAL_TOPIC, len(expected), key=b"sess-cap",
                                 worker=worker))
    finally:
        worker.stop()
    assert got == expected


def test_batched_records_and_garbage_go_to_their_topics(settings, worker, tmp_path):
    path = timed(CAPTURED / "codex-exec" / "codex-exec__tool_shell.capture.jsonl", tmp_path)
    expected = _offline("codex-exec", "sess-batch", path)
    records = records_from_file(str(path), "capture", batch=50)
    assert len(records) == 1
    garbage = RawRecord(b"\x00\x01 definitely not json", "agent", None)
    asyncio.run(produce(settings, "codex-exec", "sess-batch", [garbage, *records]))
    got = decoded(read_topic(settings, CANONICAL_TOPIC, len(expected), key=b"sess-batch",
                                worker=worker))
    # one record carries one capture time (its `t` header) for all of its lines
    assert [{**e, "createdAt": None} for e in got] == [{**e, "createdAt": None} for e in expected]
    [dead] = read_topic(settings, DEADLETTER_TOPIC, 1, key=b"sess-batch")
    dl = decode_deadletter(dead.value)
    assert (dl.value, dl.topic, dl.provider, dl.errorClass) == (
        b"\x00\x01 definitely not json", "agents.raw.codex-exec", "codex-exec", "MalformedRecord")


def test_chat_projection_reads_back_from_the_chat_topic(settings, worker, tmp_path):
    from pipeline.tools.replay import ChatView
    from topics.canonical import decode_event
    from topics.catalog import CHAT_TOPIC
    from topics.chat import encode_chat

    path = timed(CAPTURED / "codex-exec" / "codex-exec__tool_shell.capture.jsonl", tmp_path)
    view = ChatView()
    expected = [json.loads(encode_chat(r)) for e in _offline("codex-exec", "sess-chat", path)
                for r in view.feed(decode_event(json.dumps(e)))]
    asyncio.run(produce(settings, "codex-exec", "sess-chat",
                        records_from_file(str(path), "capture")))
    got = decoded(read_topic(settings, CHAT_TOPIC, len(expected), key=b"sess-chat",
                             worker=worker))
    assert [r["type"] for r in got] == ["text", "tool_use", "tool_result", "text", "done"]
    assert got == expected
