"""Input at the edges, through the commands an operator runs (`python -m pipeline.cli`)
and through a real worker on the embedded broker: a line nested deeper than any
decoder goes, a capture time no date can say inside a batched record, files that are
not the provider's native messages. Each costs its own line, or is refused whole with
one line before anything is sent; never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipeline.conftest import decoded, read_topic, timed
from tests.pipeline.test_operator import CAPTURE, NOBODY, canonflow, one_line
from topics.catalog import CANONICAL_TOPIC, DEADLETTER_TOPIC

#: A JSON value nested 10,000 deep: past msgspec's decoder, and past Python's recursion.
DEEP = "[" * 10_000 + "]" * 10_000


def _capture_lines() -> list[str]:
    return [x for x in CAPTURE.read_text().splitlines() if x.strip()]


def _dead_letters(stderr: str) -> list[dict]:
    return [json.loads(x) for x in stderr.splitlines() if x.startswith("{")]


def test_replay_makes_a_deeply_nested_capture_line_one_dead_letter_and_goes_on(tmp_path):
    """It was a RecursionError traceback, and nothing after the line was translated."""
    lines = _capture_lines()
    bad = '{"origin": "agent", "t": 1, "msg": {"x": ' + DEEP + "}}"
    poisoned = tmp_path / "s.capture.jsonl"
    poisoned.write_text("\n".join([*lines[:3], bad, *lines[3:]]) + "\n")
    clean = tmp_path / "clean" / "s.capture.jsonl"
    clean.parent.mkdir()
    clean.write_text("\n".join(lines) + "\n")
    got = canonflow("replay", "-p", "codex", "--format", "capture", str(poisoned))
    want = canonflow("replay", "-p", "codex", "--format", "capture", str(clean))
    assert got.returncode == 0 and "Traceback" not in got.stderr, got.stderr[-2000:]
    [dead] = _dead_letters(got.stderr)
    assert (dead["errorClass"], dead["offset"]) == ("MalformedCapture", 4)
    assert dead["reason"] == "not a capture line: JSON nested too deeply to decode"
    assert got.stdout == want.stdout and want.stdout.count("\n") > 5


def test_replay_of_a_native_file_whose_first_line_is_nested_too_deeply(tmp_path):
    """The first line's format check raised RecursionError; the worker dead-letters it."""
    path = tmp_path / "s.jsonl"
    path.write_text('{"type": "x", "a": ' + DEEP + '}\n{"type": "system", "subtype": "init"}\n')
    r = canonflow("replay", "-p", "claude", str(path))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    [dead] = _dead_letters(r.stderr)
    assert (dead["errorClass"], dead["reason"]) == ("MalformedRecord",
                                                    "JSON nested too deeply to decode")
    assert '"sessionId":"s"' in r.stdout


def test_produce_refuses_a_capture_with_a_deeply_nested_line_before_sending_any(tmp_path):
    """It was a RecursionError traceback. Refused with the line's number, before any
    connection (the broker here answers nothing)."""
    lines = _capture_lines()
    path = tmp_path / "s.capture.jsonl"
    path.write_text("\n".join([*lines[:2], '{"origin": "agent", "msg": ' + DEEP + "}"]) + "\n")
    r = canonflow("produce", "-p", "codex", "-s", "s", "--format", "capture",
                  "--broker", NOBODY, str(path))
    assert one_line(r, 1) == (f"canonflow: {path}: not a capture file: line 3: JSON nested "
                              "too deeply to decode")


@pytest.mark.parametrize(("bad_t", "where"), [(10**20, "first"), (10**16, "first"),
                                             (10**20, "amid")])
def test_a_capture_time_no_date_can_say_costs_its_line_in_a_batched_record(
        bad_t, where, settings, worker, tmp_path):
    """`produce --batch 50` put the line in a record with its neighbours. First in its
    record, it gave the record its time: past a signed 64-bit Kafka timestamp that was
    an OverflowError traceback; below it, the worker dead-lettered every line of the
    record. Amid a record, its time was dropped and the line translated, where replay
    dead-letters it. Now the line is a record of its own, and the worker gives what
    replay gives: that line's dead letter, and every other line's events."""
    rows = [json.loads(x) for x in timed(CAPTURE, tmp_path).read_text().splitlines()]
    runs = [i for i in range(1, len(rows) - 2) if rows[i - 1]["origin"] == "client"
            and rows[i]["origin"] == rows[i + 1]["origin"] == rows[i + 2]["origin"] == "agent"]
    bad = runs[0] if where == "first" else runs[0] + 1  # a record's first line, or its second
    rows[bad]["t"] = bad_t
    path = tmp_path / "sess-t.capture.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))

    replayed = canonflow("replay", "-p", "codex", "--format", "capture", str(path))
    [want_dead] = _dead_letters(replayed.stderr)
    assert want_dead["reason"] == f"capture time {bad_t} ms is not between 1970 and 9999"
    want = [json.loads(x) for x in replayed.stdout.splitlines()]
    assert len(want) > 10

    sent = canonflow("produce", "-p", "codex", "-s", "sess-t", "--format", "capture",
                     "--batch", "50", "--broker", settings.broker, str(path))
    assert sent.returncode == 0 and "Traceback" not in sent.stderr, sent.stderr[-2000:]
    got = decoded(read_topic(settings, CANONICAL_TOPIC, len(want), key=b"sess-t",
                             worker=worker))
    [got_dead] = decoded(read_topic(settings, DEADLETTER_TOPIC, 1, worker=worker))
    # a record's lines take its first line's time (createdAt); the events are replay's
    assert [(e["seq"], e["type"], e["eventId"]) for e in got] == \
        [(e["seq"], e["type"], e["eventId"]) for e in want]
    same = ("errorClass", "reason", "value", "key", "origin")
    assert {k: got_dead.get(k) for k in same} == {k: want_dead.get(k) for k in same}
    assert got_dead["timestampMs"] == bad_t


SAMPLES = Path(__file__).resolve().parents[2] / "pipeline" / "tools" / "samples"
#: A live-stream sample capture of each provider (transcripts are `import`'s and `ship`'s).
LIVE = {p.name.split("__")[0]: p for p in sorted(SAMPLES.glob("*__*.jsonl"))
        if "transcript" not in p.name}


def _native(capture: Path, tmp_path: Path) -> Path:
    """The agent's lines of a capture, as native messages (what a sidecar records)."""
    out = tmp_path / f"{capture.stem}.jsonl"
    rows = [json.loads(x) for x in capture.read_text().splitlines() if x.strip()]
    out.write_text("".join(json.dumps(r["msg"]) + "\n" for r in rows
                           if r.get("origin", "agent") == "agent"))
    return out


@pytest.mark.parametrize(("content", "says"), [
    (b"hello world\nsecond line\n", "line 1 is not JSON (JSON is malformed: invalid "
                                    "character (byte 0)): a native line is one JSON object"),
    (bytes(range(256)) * 8, "line 1 is not JSON (JSON is malformed: invalid character "
                            "(byte 0)): a native line is one JSON object"),
    (b'{"type": "system", "subtype": "init"}\n[1, 2]\n',
     "line 2 is a JSON list: a native line is one JSON object"),
    (b'{"type": "system"}\n{"a": ' + DEEP.encode() + b"}\n",
     "line 2 is JSON nested too deeply to decode"),
], ids=["text", "binary", "a-list", "too-deep"])
def test_produce_refuses_a_native_file_of_lines_that_are_not_json_objects(content, says,
                                                                          tmp_path):
    """A text or binary file was sent, each line to be dead-lettered, without a word.
    Refused before any connection (the broker here answers nothing: that would be 3)."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(content)
    r = canonflow("produce", "-p", "claude", "-s", "s", "--broker", NOBODY, str(path))
    assert one_line(r, 1) == f"canonflow: {path}: {says}"


@pytest.mark.parametrize(("sample", "provider"), [("codex", "claude"), ("claude", "codex"),
                                                  ("opencode", "acp")])
@pytest.mark.parametrize("fmt", ["native", "capture"])
def test_produce_refuses_another_runtimes_file(sample, provider, fmt, tmp_path):
    """Every line would have been a dead letter or an unknown-type warning, silently."""
    path = LIVE[sample] if fmt == "capture" else _native(LIVE[sample], tmp_path)
    r = canonflow("produce", "-p", provider, "-s", "s", "--format", fmt, "--broker", NOBODY,
                  str(path))
    assert one_line(r, 1) == (f"canonflow: {path}: no line is a {provider} message (each is "
                              "malformed or of a type its adapter does not know): another "
                              "runtime's file?")


@pytest.mark.parametrize("provider", sorted(LIVE))
@pytest.mark.parametrize("fmt", ["native", "capture"])
def test_produce_takes_each_providers_own_file(provider, fmt, tmp_path):
    """The checks refuse no provider's own messages: its file goes to the broker (here
    none answers: 3, after the checks)."""
    path = LIVE[provider] if fmt == "capture" else _native(LIVE[provider], tmp_path)
    r = canonflow("produce", "-p", provider, "-s", "s", "--format", fmt, "--broker", NOBODY,
                  str(path))
    assert one_line(r, 3).startswith("canonflow: no broker answers")
