"""Secrets streamed across deltas (issue 25): each content.delta was redacted alone, so a
key split over two deltas passed in halves, and a consumer joining the deltas (the chat's
`accumulated`, any UI) had it whole. The conversation core holds back a delta's tail that
may start a secret (adapters.core.emitter.Emitter, "Held back"; pipeline.privacy.redact.hold_point), so
the redactor sees the secret in one event. Through the worker's own step
(pipeline.worker.normalize.Normalizer), one native message per record, the state stored
between records as the tables keep it."""

from __future__ import annotations

import json
import random

import pytest

from pipeline.privacy.redact import hold_point
from pipeline.worker.normalize import BatchSpool, Normalizer
from tests.pipeline.secret_corpus import CORPUS, Case

SID = b"sess-stream"


def _gemini(chunks: list[str]) -> list[bytes]:
    """A Gemini CLI stream-json turn whose assistant reply is streamed in `chunks`."""
    msgs = [{"type": "init", "session_id": "g", "model": "auto"},
            {"type": "message", "role": "user", "content": "show me"},
            *({"type": "message", "role": "assistant", "content": c, "delta": True}
              for c in chunks),
            {"type": "result", "status": "success"}]
    return [json.dumps(m).encode() for m in msgs]


def _published(records: list[bytes]) -> tuple[list[dict], list[dict]]:
    """(canonical events, chat records) of `records` through the Normalizer."""
    n = Normalizer("gemini")
    items: dict[bytes, bytes] = {}
    state, events, chat = None, [], []
    for offset, value in enumerate(records):
        spool = BatchSpool(items.get)
        out = n.process(state, SID, value, partition=0, offset=offset, spool=spool)
        for entry in spool.entries(False) + spool.entries(True):
            if entry.value is None:
                items.pop(entry.key, None)
            else:
                items[entry.key] = entry.value
        assert out.deadletters == [], out.deadletters
        state = out.state or state
        events += [json.loads(r) for r in out.records]
        chat += [json.loads(r) for r in out.chat]
    return events, chat


def _splits(case: Case, rng: random.Random) -> list[list[str]]:
    """The case's text cut inside each secret (at its middle and at random points)."""
    out = []
    for secret in case.secrets:
        at = case.text.find(secret)
        if at < 0 or len(secret) < 2:
            continue
        cuts = {at + len(secret) // 2, at + 1, at + len(secret) - 1,
                *(rng.randrange(at + 1, at + len(secret)) for _ in range(3))}
        for cut in sorted(cuts):
            out.append([case.text[:cut], case.text[cut:]])
        three = sorted(rng.sample(range(at + 1, at + len(secret)), min(2, len(secret) - 1)))
        out.append([case.text[:three[0]], case.text[three[0]:three[-1]], case.text[three[-1]:]])
    return out


#: A secret member's array or object cut between two deltas (chunks): the hold point
#: does not hold such a value back, so its later elements reach the redactor without
#: their name (adapters/core/hold.py)
NOT_HELD = {"json-array-password", "json-object-secret", "json-escaped-name-array"}


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.xfail(strict=True, reason="not held back: NOT_HELD"))
    if c.name in NOT_HELD else c for c in CORPUS], ids=[c.name for c in CORPUS])
def test_a_secret_split_across_deltas_is_published_nowhere(case: Case):
    rng = random.Random(case.name)
    splits = _splits(case, rng)
    assert splits, "the case has a secret inside its text"
    for chunks in splits:
        events, chat = _published(_gemini(chunks))
        deltas = [e["payload"]["delta"] for e in events if e["type"] == "content.delta"]
        joined = "".join(deltas)
        everything = json.dumps(events) + json.dumps(chat)
        for secret in case.secrets:
            assert secret not in joined, (case.name, chunks)
            assert secret not in everything, (case.name, chunks)
        # the text is all there: what was not a secret is published as it was
        assert joined.replace("[REDACTED]", "") != "" and len(deltas) >= 1


def test_holding_back_moves_no_text_of_an_ordinary_answer():
    """Plain prose is never held: its deltas are published as the runtime cut them."""
    chunks = ["The build passed. ", "I ran the tests and ", "all 42 of them pass; ",
              "the git status is clean."]
    events, _ = _published(_gemini(chunks))
    assert [e["payload"]["delta"] for e in events if e["type"] == "content.delta"] == chunks


def test_a_held_tail_is_published_before_its_item_completes():
    """A reply that ends on what may start a secret ("... token") publishes it, alone and
    synthetic, before the item completes: the deltas still join to the whole reply."""
    chunks = ["Set the ", "api_key"]
    events, _ = _published(_gemini(chunks))
    kinds = [(e["type"], e["payload"].get("delta"), e["synthetic"]) for e in events
             if e["type"] in ("content.delta", "item.completed")
             and e["payload"].get("itemType", "assistant_message") == "assistant_message"]
    assert kinds[:2] == [("content.delta", "Set the ", False), ("content.delta", "api_key", True)]
    assert kinds[2][0] == "item.completed"


def test_hold_point_costs_a_bounded_scan_whatever_the_text():
    """It reads the last three words (and a private key's BEGIN in the last 8 KiB)."""
    text = "word " * 200_000
    assert hold_point(text) == len(text)
    assert hold_point(text + "ghp_ab") == len(text)
    assert hold_point("key: ghp_ab") == len("key: ")
