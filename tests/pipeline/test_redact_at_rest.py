"""No secret at rest in the items table (issue 25). The conversation core spools the
output a completed item must carry (a Codex command whose completion has no
`aggregatedOutput`) chunk by chunk into `items.<provider>`, whose changelog keeps every
value for its retention. The worker's spool (pipeline.worker.normalize.BatchSpool)
redacts each chunk before it is stored, with the previous chunk's tail when a record
ended inside a secret. Through the worker's own step, one native message per record,
the table kept as the worker keeps it, and every value ever written recorded."""

from __future__ import annotations

import json
import random

import pytest

from pipeline.privacy.redact import Redactor
from pipeline.worker.normalize import BatchSpool, Normalizer
from tests.pipeline.secret_corpus import CORPUS, Case

SID = b"sess-at-rest"
T, U = "thr-1", "turn-1"


def _codex(chunks: list[str]) -> list[bytes]:
    """A Codex app-server turn running one command whose output streams in `chunks` and
    whose completion does not repeat it (the core must spool it)."""
    base = {"type": "commandExecution", "id": "cmd", "command": "env", "cwd": "/w",
            "commandActions": [], "status": "inProgress"}

    def item(method: str, it: dict) -> dict:
        return {"method": method, "params": {"threadId": T, "turnId": U, "item": it}}

    msgs = [{"method": "turn/started", "params": {"threadId": T, "turn": {
                "id": U, "status": "inProgress", "items": []}}},
            item("item/started", base),
            *({"method": "item/commandExecution/outputDelta",
               "params": {"threadId": T, "turnId": U, "itemId": "cmd", "delta": c}}
              for c in chunks),
            item("item/completed", {**base, "status": "completed", "exitCode": 0,
                                    "aggregatedOutput": None})]
    return [json.dumps(m).encode() for m in msgs]


def _run(records: list[bytes], redactor: Redactor) -> tuple[list[bytes], str]:
    """(every items-table value written, the completed command's published output)."""
    n = Normalizer("codex", redactor=redactor)
    items: dict[bytes, bytes] = {}
    written: list[bytes] = []
    state, output = None, ""
    for offset, value in enumerate(records):
        spool = BatchSpool(items.get, redactor)
        out = n.process(state, SID, value, partition=0, offset=offset, spool=spool)
        for e in spool.entries(False) + spool.entries(True):
            if e.value is None:
                items.pop(e.key, None)
            else:
                items[e.key] = e.value
                written.append(e.value)
        assert out.deadletters == [], out.deadletters
        state = out.state or state
        for r in out.records:
            e = json.loads(r)
            if e["type"] == "item.completed" and e["payload"].get("itemType") == "command_execution":
                output = e["payload"]["output"]
    assert items == {}, "the completed item's chunks were dropped"
    return written, output


def _cuts(case: Case, rng: random.Random) -> list[list[str]]:
    """The case's text as one chunk, and cut inside each secret (middle, random)."""
    out = [[case.text]]
    for secret in case.secrets:
        at = case.text.find(secret)
        if at < 0 or len(secret) < 2:
            continue
        for cut in sorted({at + len(secret) // 2, rng.randrange(at + 1, at + len(secret))}):
            out.append([case.text[:cut], case.text[cut:]])
    return out


#: A secret member's array or object cut between two deltas (chunks): the hold point
#: does not hold such a value back, so its later elements reach the redactor without
#: their name (adapters/core/hold.py)
NOT_HELD = {"json-array-password", "json-escaped-name-array"}


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.xfail(strict=True, reason="not held back: NOT_HELD"))
    if c.name in NOT_HELD else c for c in CORPUS], ids=[c.name for c in CORPUS])
def test_spooled_output_is_stored_redacted_even_when_a_record_cut_the_secret(case: Case):
    redactor = Redactor.from_env({})
    rng = random.Random(case.name)
    for chunks in _cuts(case, rng):
        written, output = _run(_codex(chunks), redactor)
        assert written, "the command's output was spooled"
        for secret in case.secrets:
            for value in written:
                assert secret.encode() not in value, (chunks, value)
            assert secret not in output
        assert "[REDACTED" in output


def test_without_redaction_the_spool_stores_the_output_as_it_came():
    """The same path with redaction off: the chunks are the output itself (the test
    above does not pass for want of spooling)."""
    text = "line one\nline two\n"
    written, output = _run(_codex(["line one\n", "line two\n"]), Redactor([]))
    assert output == text
    assert b"".join(written) == text.encode()


@pytest.mark.parametrize("case", CORPUS[:8], ids=[c.name for c in CORPUS[:8]])
def test_a_secret_across_a_full_chunk_inside_one_record_is_stored_redacted(case: Case):
    """One delta longer than a chunk (16 Ki characters): the core cuts it in chunks
    within the record, and the cut may fall inside a secret."""
    from adapters.core.emitter import _CHUNK

    redactor = Redactor.from_env({})
    secret = case.secrets[0]
    at = case.text.find(secret)
    filler = "x" * (_CHUNK - at - len(secret) // 2 - 1) + "\n"
    written, output = _run(_codex([filler + case.text]), redactor)
    assert len(written) >= 2, "the delta filled more than one chunk"
    for value in written:
        assert secret.encode() not in value
    assert secret not in output and output.startswith(filler)
