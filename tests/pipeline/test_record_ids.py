"""Raw records with a `record-id` header: a record a producer sends again (a retry without
idempotence, a `canonflow produce` run again) is translated once, messages without ids
(Codex text deltas) included."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.privacy.redact import Redactor
from pipeline.settings import child_env
from pipeline.tools.kafka_io import file_stream, produce, records_from_file
from pipeline.worker.normalize import Normalizer, SessionEntry
from tests.pipeline.conftest import decoded, read_topic, timed
from tests.pipeline.test_integration import _offline
from tests.transcripts.test_ship import append, session_lines
from topics.catalog import CANONICAL_TOPIC, raw_topic
from topics.records import PRODUCERS_KEPT, decode_deadletter, record_id

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
TEXT = CAPTURED / "codex" / "codex-app-server__reasoning.capture.jsonl"
DELTA = b"item/agentMessage/delta"


def _text(events: list[dict]) -> str:
    return "".join(e["payload"]["delta"] for e in events if e["type"] == "content.delta"
                   and e["payload"].get("streamKind") == "assistant_text")


def test_records_a_producer_sends_again_give_their_text_once(settings, worker, tmp_path):
    path = timed(TEXT, tmp_path)
    expected = _offline("codex", "sess-again", path)
    records = records_from_file(str(path), "capture")
    deltas = [i for i, r in enumerate(records) if DELTA in r.value]
    assert len(deltas) >= 3 and _text(expected)
    # a producer that retried the records from the first delta to the third: they are
    # in the topic twice, with their ids, between the records that follow
    cut = deltas[2] + 1
    again = records[:cut] + records[deltas[0]:cut] + records[cut:]
    asyncio.run(produce(settings, "codex", "sess-again", again))
    # the session's events come in order: a copy translated would be among the first
    got = decoded(read_topic(settings, CANONICAL_TOPIC, len(expected), key=b"sess-again",
                             worker=worker))
    assert _text(got) == _text(expected)
    assert got == expected


def test_produce_run_again_sends_what_the_worker_already_has(settings, worker, tmp_path):
    """`canonflow produce` of the same file twice (a retried run): the second run's
    records have the first's ids; a record of another file after them is the next
    event of the session."""
    path = timed(TEXT, tmp_path)
    expected = _offline("codex", "sess-rerun", path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    for _ in range(2):
        run = subprocess.run([sys.executable, "-m", "pipeline.cli", "produce", "--broker",
                              settings.broker, "-p", "codex", "-s", "sess-rerun",
                              "--format", "capture", str(path)],
                             capture_output=True, text=True, timeout=120, env=env)
        assert run.returncode == 0, run.stderr
    marker = tmp_path / "marker.jsonl"
    marker.write_text(json.dumps({"t": 1_764_000_100_000, "msg": {
        "method": "warning", "params": {"message": "after the second run"}}}) + "\n")
    asyncio.run(produce(settings, "codex", "sess-rerun",
                        records_from_file(str(marker), "capture")))
    got = decoded(read_topic(settings, CANONICAL_TOPIC, len(expected) + 1,
                             key=b"sess-rerun", worker=worker))
    assert got[:-1] == expected
    assert "after the second run" in json.dumps(got[-1]["payload"])


def test_produce_gives_each_record_its_file_and_end_offset(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":"a"}\n\n{"type":"b"}\n{"type":"c"}\n')
    stream = file_stream(str(path))
    assert [r.rid for r in records_from_file(str(path), "native")] == [
        f"{stream}:13", f"{stream}:27", f"{stream}:40"]
    # batched: a record's id is its last line's
    assert [r.rid for r in records_from_file(str(path), "native", batch=2)] == [
        f"{stream}:27", f"{stream}:40"]
    assert file_stream(str(tmp_path / "." / "s.jsonl")) == stream  # the file, not its spelling
    # a capture line's own id is kept
    cap = tmp_path / "c.jsonl"
    cap.write_text(json.dumps({"origin": "agent", "msg": {"type": "a"},
                               "record-id": "sidecar-7:41"}) + "\n")
    [r] = records_from_file(str(cap), "capture")
    assert r.rid == "sidecar-7:41" and ("record-id", b"sidecar-7:41") in r.headers()


def _lines(path: Path) -> list[bytes]:
    return [x for x in path.read_bytes().splitlines() if x.strip()]


def test_replay_drops_the_lines_whose_record_id_it_has_seen_as_the_worker_does(tmp_path):
    path = timed(TEXT, tmp_path)
    lines = [json.loads(x) for x in _lines(path)]
    ided = [{**x, "record-id": f"side:{n}"} for n, x in enumerate(lines)]
    deltas = [n for n, x in enumerate(lines) if x["msg"].get("method") == DELTA.decode()]
    cut = deltas[2] + 1
    again = tmp_path / "again.jsonl"
    again.write_text("".join(json.dumps(x) + "\n"
                             for x in ided[:cut] + ided[deltas[0]:cut] + ided[cut:]))
    once = tmp_path / "once.jsonl"
    once.write_text("".join(json.dumps(x) + "\n" for x in ided))
    out = {}
    for f in (once, again):
        run = subprocess.run([sys.executable, "-m", "pipeline.cli", "replay", "-p", "codex",
                              "--format", "capture", "-s", "s", str(f)],
                             capture_output=True, timeout=120)
        assert run.returncode == 0 and run.stderr == b"", run.stderr
        out[f.name] = run.stdout
    assert out["again.jsonl"] == out["once.jsonl"]
    # the worker's step, fed the same lines as records with those headers, agrees
    n = Normalizer("codex", chat=False, redactor=Redactor.from_env({}))
    state, records = None, []
    for offset, x in enumerate(ided[:cut] + ided[deltas[0]:cut] + ided[cut:]):
        o = n.process(state, b"s", json.dumps(x["msg"]).encode(), partition=0, offset=offset,
                      headers=[("origin", x["origin"].encode()), ("t", str(x["t"]).encode()),
                               ("record-id", x["record-id"].encode())])
        state = o.state if o.state is not None else state
        records += o.records
    assert [json.loads(r) for r in records] == [json.loads(x) for x in
                                                out["once.jsonl"].splitlines()]


def test_a_session_keeps_the_marks_of_its_last_producers_only():
    n = Normalizer("codex-exec", chat=False)
    state = None
    line = b'{"type":"turn.started"}'
    for k in range(PRODUCERS_KEPT + 1):
        o = n.process(state, b"s", line, partition=0, offset=k,
                      headers=[("record-id", f"p{k}:5".encode())])
        assert o.records
        state = o.state
    entry = n.decode_state(state)
    assert isinstance(entry, SessionEntry)
    assert list(entry.producers) == [f"p{k}:5".split(":")[0]
                                     for k in range(1, PRODUCERS_KEPT + 1)]
    # the oldest stream was forgotten: its next record is translated, a kept one's copy not
    assert n.process(state, b"s", line, partition=0, offset=20,
                     headers=[("record-id", b"p1:5")]).state is None
    assert n.process(state, b"s", line, partition=0, offset=21,
                     headers=[("record-id", b"p0:5")]).records


@pytest.mark.parametrize("value", [b"nocolon", b":5", b"p:-1", b"p:five", b"p:"])
def test_a_record_id_of_another_form_is_a_bad_header(value: bytes):
    [letter] = Normalizer("codex-exec").process(
        None, b"s", b'{"type":"turn.started"}', partition=0, offset=0,
        headers=[("record-id", value)]).deadletters
    d = decode_deadletter(letter)
    assert d.errorClass == "BadHeader" and "record-id" in d.reason


def test_ship_numbers_a_shippers_records_in_the_order_it_sends_them(settings, tmp_path):
    home = tmp_path / "home"
    name, lines = session_lines("claude-code-stream-json", "text")
    append(home / ".claude" / "projects" / "-w" / name, b"".join(lines))
    run = subprocess.run([sys.executable, "-m", "pipeline.cli", "ship", "--once",
                          "--checkpoint", str(tmp_path / "cp.json"), str(home)],
                         capture_output=True, text=True, env=child_env(settings), timeout=120)
    assert run.returncode == 0, run.stderr
    shipped = read_topic(settings, raw_topic("claude-transcript"), len(lines))
    ids = [record_id(dict(r.headers)["record-id"]) for r in shipped]
    shipper = json.loads((tmp_path / "cp.json").read_bytes())["shipper"]
    assert {stream for stream, _ in ids} == {f"ship:{shipper}"}
    assert [n for _, n in ids] == sorted({n for _, n in ids})  # increasing, no two alike
