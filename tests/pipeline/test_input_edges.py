"""Input at the edges, through the commands an operator runs (`python -m pipeline.cli`)
and through a real worker on the embedded broker: a line nested deeper than any
decoder goes, a capture time no date can say inside a batched record, files that are
not the provider's native messages. Each costs its own line, or is refused whole with
one line before anything is sent; never a traceback."""

from __future__ import annotations

import json

from tests.pipeline.test_operator import CAPTURE, NOBODY, canonflow, one_line

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
