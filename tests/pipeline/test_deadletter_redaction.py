"""Dead letters go through the same redaction as every output, the lines of a record
together: a record that is not JSON is dead-lettered line by line, and a private key
in it must not leave its body lines readable in agents.deadletter. What a letter keeps
to match the original: valueSha256 (its value's) and recordSha256 (the raw record's).

Every secret format of the corpus, inside records that are not JSON and records cut
short in the middle of their JSON, through a real worker on the embedded broker and
through `canonflow replay` (whose records are one line each)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET

from adapters import split_lines
from pipeline.privacy.redact import Redactor
from pipeline.tools.kafka_io import RawRecord, produce
from pipeline.worker.normalize import Normalizer
from pipeline.worker.process import WorkerProcess
from tests.pipeline.conftest import read_topic
from tests.pipeline.secret_corpus import CORPUS, Case, pem_body
from topics.catalog import DEADLETTER_TOPIC, raw_topic
from topics.records import decode_deadletter

ROOT = Path(__file__).resolve().parents[2]
PROVIDER = "codex-exec"
BODY = pem_body(25)
#: the finding's record: a whole private key, 25 body lines, nothing else
PEM = "\n".join(["-----BEGIN PRIVATE KEY-----", *BODY, "-----END PRIVATE KEY-----"])
#: a record that mixes JSON lines (translated), a key, and lines around it
MIXED = "\n".join(['{"type": "thread.started", "thread_id": "t-mixed"}', "$ cat deploy.pem",
                   PEM, "$ echo done", '{"type": "turn.started"}'])
PEM_CASE = Case("whole-private-key", PEM, tuple(BODY))
MIXED_CASE = Case("private-key-among-json-lines", MIXED, tuple(BODY))


def _half_json(text: str) -> str:
    """`text` in a codex-exec record cut short inside its JSON string."""
    return '{"type": "item.completed", "item": {"id": "c", "type": "command_execution", ' \
           '"aggregated_output": "' + json.dumps(text)[1:-1]


def _records() -> list[tuple[Case, bytes]]:
    """(case, raw record) for every corpus case as text and as half-JSON, and the keys."""
    out = [(PEM_CASE, PEM.encode()), (MIXED_CASE, MIXED.encode())]
    for case in CORPUS:
        out.append((case, case.text.encode()))
        out.append((case, _half_json(case.text).encode()))
    return out


def _leaks(case: Case, values: list[bytes]) -> list[str]:
    """The secrets of `case` in `values`, as they are or JSON-escaped."""
    return [s for s in case.secrets
            if any(form in v for v in values for form in (s.encode(), msgspec.json.encode(s)[1:-1]))]


def _expected_letters(records: list[bytes]) -> int:
    """The dead letters the worker's Normalizer makes of `records`, in one session."""
    step, state, n = Normalizer(PROVIDER, redactor=Redactor.from_env({})), None, 0
    for offset, value in enumerate(records):
        out = step.process(state, b"k", value, partition=0, offset=offset)
        state = out.state if out.state is not None else state
        n += len(out.deadletters)
    return n


def _worker_letters(settings: Any, worker: Any, records: list[bytes]) -> tuple[list[Any], dict]:
    """Each record produced to the raw topic as its own session; (the dead letters the
    worker published, the raw records by (partition, offset))."""
    want = 0
    for i, value in enumerate(records):
        asyncio.run(produce(settings, PROVIDER, f"dl-{i}", [RawRecord(value, "agent", None)]))
        want += _expected_letters([value])
    letters = [decode_deadletter(r.value)
               for r in read_topic(settings, DEADLETTER_TOPIC, want, worker=worker)]
    assert len(letters) == want
    raws = read_topic(settings, raw_topic(PROVIDER), len(records))
    return letters, {(r.partition, r.offset): r.value for r in raws}


def test_a_private_key_in_one_record_is_masked_in_every_line_of_its_dead_letters():
    step = Normalizer(PROVIDER, redactor=Redactor.from_env({}))
    for case in (PEM_CASE, MIXED_CASE):
        value = case.text.encode()
        letters = [decode_deadletter(d) for d in
                   step.process(None, b"s", value, partition=1, offset=4).deadletters]
        assert letters and _leaks(case, [d.value for d in letters]) == []
        lines = split_lines(value)
        for d in letters:
            if d.valueSha256 is not UNSET:  # redacted: the original line's hash, the record's
                assert d.valueSha256 == hashlib.sha256(lines[d.line]).hexdigest()
                assert d.recordSha256 == hashlib.sha256(value).hexdigest()
                assert d.valueBytes == len(lines[d.line])
        assert sum(d.value == b"[REDACTED]" for d in letters) == len(BODY) + 2


def test_the_worker_redacts_every_secret_of_the_corpus_from_its_dead_letters(settings, worker):
    cases = _records()
    letters, raws = _worker_letters(settings, worker, [v for _, v in cases])
    by_session = {}
    for d in letters:
        by_session.setdefault(d.key, []).append(d)
    for i, (case, value) in enumerate(cases):
        got = by_session[f"dl-{i}"]
        assert _leaks(case, [d.value for d in got]) == [], (case.name, i)
        original = raws[(got[0].partition, got[0].offset)]
        assert original == value
        lines = split_lines(original)
        redacted = [d for d in got if d.valueSha256 is not UNSET]
        assert redacted, case.name  # every record here holds a secret
        for d in redacted:
            # the operator's way back: the raw record at topic/partition/offset, its line
            assert d.recordSha256 == hashlib.sha256(original).hexdigest()
            assert d.valueSha256 == hashlib.sha256(lines[d.line]).hexdigest()
            assert b"[REDACTED]" in d.value and "redacted" in d.reason


def test_a_private_key_produced_one_line_a_record_is_masked_in_the_workers_dead_letters(
        settings, worker):
    # as `canonflow produce` sends a file (one line a record): the body lines' context
    # is the session's records before them
    lines = PEM.encode().split(b"\n")
    asyncio.run(produce(settings, PROVIDER, "dl-lines",
                        [RawRecord(line, "agent", None) for line in lines]))
    letters = [decode_deadletter(r.value) for r in
               read_topic(settings, DEADLETTER_TOPIC, len(lines), key=b"dl-lines", worker=worker)]
    assert len(letters) == len(lines) and _leaks(PEM_CASE, [d.value for d in letters]) == []
    raws = {(r.partition, r.offset): r.value
            for r in read_topic(settings, raw_topic(PROVIDER), len(lines), key=b"dl-lines")}
    masked = [d for d in letters if d.value == b"[REDACTED]"]
    assert len(masked) == len(BODY) + 1  # the header alone is no secret; the body and END
    for d in masked:
        original = raws[(d.partition, d.offset)]
        assert d.recordSha256 == d.valueSha256 == hashlib.sha256(original).hexdigest()


def test_with_redaction_off_the_workers_dead_letters_keep_the_original(settings, tmp_path):
    w = WorkerProcess(settings, log_path=str(tmp_path / "worker-off.log"),
                      env={"CANONFLOW_REDACT": "0"}).start()
    try:
        letters, _ = _worker_letters(settings, w, [PEM.encode()])
    finally:
        w.stop()
    assert [d.value for d in letters] == split_lines(PEM.encode())
    assert all(d.valueSha256 is UNSET and d.recordSha256 is UNSET for d in letters)


# -- replay: a file's lines are records of one line each ------------------------------

def _replay_file(tmp_path: Path) -> tuple[Path, list[tuple[Case, list[bytes]]]]:
    """A native file: each case as text lines, then half-JSON, a JSON line between
    cases (it ends a run of dead lines); (path, (case, its lines) in order)."""
    parts: list[tuple[Case, list[bytes]]] = []
    for case, value in _records():
        lines = [ln.rstrip(b"\r") for ln in value.split(b"\n") if ln.strip()]
        parts.append((case, lines))
    path = tmp_path / "dead.jsonl"
    with path.open("wb") as f:
        for i, (_, lines) in enumerate(parts):
            f.write(b"\n".join(lines) + b"\n")
            f.write(json.dumps({"type": "thread.started", "thread_id": f"t{i}"}).encode() + b"\n")
    return path, parts


def _replay(path: Path, env: dict[str, str]) -> list[Any]:
    run = subprocess.run([sys.executable, "-m", "pipeline.cli", "replay", "-p", PROVIDER,
                          str(path)], capture_output=True, cwd=ROOT, timeout=120,
                         env={**{k: v for k, v in os.environ.items()
                                 if not k.startswith("CANONFLOW_")}, "PYTHONPATH": str(ROOT),
                              **env})
    assert run.returncode in (0, 1), run.stderr[-2000:]
    return [decode_deadletter(ln) for ln in run.stderr.splitlines() if ln.startswith(b"{")]


def test_replay_redacts_every_secret_of_the_corpus_from_its_dead_letters(tmp_path):
    path, parts = _replay_file(tmp_path)
    letters = _replay(path, {})
    file_lines = [ln.rstrip(b"\r") for ln in path.read_bytes().split(b"\n") if ln.strip()]
    by_offset = {d.offset: d for d in letters}
    offset = 0
    redacted = 0
    for case, lines in parts:
        got = [by_offset[o] for o in range(offset + 1, offset + len(lines) + 1) if o in by_offset]
        assert _leaks(case, [d.value for d in got]) == [], case.name
        offset += len(lines) + 1  # and the JSON line after them
        for d in got:
            if d.valueSha256 is not UNSET:
                redacted += 1
                original = file_lines[d.offset - 1]
                assert d.valueSha256 == d.recordSha256 == hashlib.sha256(original).hexdigest()
    assert redacted >= len(parts)
    # the finding's key: every line of it masked, one dead letter per line
    pem = [by_offset[o] for o in range(1, len(BODY) + 3)]
    assert [d.value for d in pem] == [b"[REDACTED]"] * (len(BODY) + 2)


def test_with_redaction_off_replay_prints_the_original_lines(tmp_path):
    path = tmp_path / "key.txt"
    path.write_text(PEM + "\n")
    letters = _replay(path, {"CANONFLOW_REDACT": "off"})
    assert [d.value for d in letters] == PEM.encode().split(b"\n")
    assert all(d.recordSha256 is UNSET for d in letters)


def test_import_redacts_a_private_key_whose_lines_are_dead_letters(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_bytes(b'{"hello": "world"}\n' + MIXED.encode() + b"\n")
    run = subprocess.run([sys.executable, "-m", "pipeline.cli", "import", "--runtime", "claude",
                          str(path)], capture_output=True, cwd=ROOT, timeout=120,
                         env={**{k: v for k, v in os.environ.items()
                                 if not k.startswith("CANONFLOW_")}, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-2000:]
    letters = [decode_deadletter(ln) for ln in run.stderr.splitlines()]
    assert _leaks(MIXED_CASE, [d.value for d in letters]) == []
    lines = path.read_bytes().split(b"\n")
    masked = [d for d in letters if d.value == b"[REDACTED]"]
    assert len(masked) == len(BODY) + 2
    for d in masked:  # each record is one line: its hash is the line's
        assert d.recordSha256 == d.valueSha256 == hashlib.sha256(lines[d.offset - 1]).hexdigest()
