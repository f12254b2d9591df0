"""`canonflow replay` reads its input a block at a time and writes each block's events
at once, redacted through one prefilter pass when no event can hold a secret (issue 24).
What it writes must not depend on where the blocks end: the same lines (as iter_lines
gives them), the same events, the same redactions, the same dead letters in order."""

from __future__ import annotations

import io
import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.tools import replay as replay_mod
from pipeline.tools.bench_replay import claude_stream_json
from pipeline.tools.replay import Format, iter_blocks, iter_lines, replay
from tests.pipeline.secret_corpus import CORPUS

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"

CLAUDE = Path(__file__).resolve().parents[1] / "fixtures" / "captured" / "claude"


class Trickle(io.BytesIO):
    """A stream whose read1 returns at most `n` bytes: a pipe that delivers slowly."""

    def __init__(self, data: bytes, n: int):
        super().__init__(data)
        self.n = n

    def read1(self, size: int = -1) -> bytes:
        return super().read1(min(self.n, size if size > 0 else self.n))


TEXT = (b"a\r\n\r\n  \n" + b"x" * 200_000 + b"\n{\"k\": 1}\r\n\nlast without end")


@pytest.mark.parametrize("n", [1, 7, 4096, 1 << 20])
def test_blocks_give_the_lines_iter_lines_gives(n):
    want = [raw for _, raw in iter_lines(io.BytesIO(TEXT))]
    got = [ln for block in iter_blocks(Trickle(TEXT, n)) for ln in block]
    assert got == want


def _secret_session() -> bytes:
    """The generated Claude session with the secret corpus streamed in its text deltas,
    and a line that is not JSON among them."""
    lines = claude_stream_json(3000).splitlines()
    out, k = [], 0
    for ln in lines:
        msg = msgspec.json.decode(ln)
        delta = msg.get("event", {}).get("delta", {}) if msg["type"] == "stream_event" else {}
        if delta.get("type") == "text_delta" and k < len(CORPUS):
            delta["text"] = CORPUS[k].text + " " + delta["text"]
            ln = msgspec.json.encode(msg)
            k += 1
        out.append(ln)
        if len(out) == 1500:
            out.append(b"{not json")
    return b"\n".join(out) + b"\n"


def _replay(data: bytes, n: int, monkeypatch, block: int,
            fmt: Format = "native") -> tuple[bytes, bytes]:
    monkeypatch.setattr(replay_mod, "BLOCK", block)
    out, err = io.BytesIO(), io.BytesIO()
    replay("claude", [("s.jsonl", Trickle(data, n))], out, err, fmt=fmt)
    return out.getvalue(), err.getvalue()


def _one_by_one(data: bytes, monkeypatch, fmt: Format = "native") -> tuple[bytes, bytes]:
    """Replay as before blocks: every event published (redacted) on its own."""
    from pipeline.privacy.redact import Redactor

    monkeypatch.setattr(Redactor, "suspects", lambda self, events: None)
    return _replay(data, 1 << 20, monkeypatch, 1 << 16, fmt)


def test_replay_writes_the_same_bytes_whatever_the_blocks(monkeypatch):
    data = _secret_session()
    with monkeypatch.context() as m:
        want_out, want_err = _one_by_one(data, m)
    assert b"[REDACTED]" in want_out and b"MalformedRecord" in want_err
    for n, block in ((1 << 20, 1 << 16), (333, 1 << 16), (1 << 20, 50)):
        with monkeypatch.context() as m:
            assert _replay(data, n, m, block) == (want_out, want_err)


def test_replay_of_every_claude_capture_is_unchanged_by_blocks(monkeypatch):
    for path in sorted(CLAUDE.glob("*stream-json*.capture.jsonl")):
        data = path.read_bytes()
        with monkeypatch.context() as m:
            want = _one_by_one(data, m, "capture")
        assert want[0].count(b"\n") > 5
        with monkeypatch.context() as m:
            assert _replay(data, 100, m, 1 << 16, "capture") == want


def _events_of(data: bytes) -> list:
    rep = replay_mod.Replayer("claude")
    events: list = []
    for n, raw in iter_lines(io.BytesIO(data)):
        events += rep.feed("s", n, raw, "native")[0]
    return events


_EVENTS = _events_of(_secret_session())


def _hook(event: dict) -> None:
    return None  # publishes every event unchanged: but each must go through it


@pytest.mark.parametrize("redactor", ["default", "hook", "no-literal pattern", "off"])
def test_a_block_with_secrets_writes_what_publishing_each_event_writes(redactor):
    from pipeline.privacy.redact import BUILTIN_PATTERNS, Redactor

    r = {"default": Redactor(list(BUILTIN_PATTERNS)),
         "hook": Redactor(list(BUILTIN_PATTERNS), _hook),
         "no-literal pattern": Redactor([*BUILTIN_PATTERNS, r"[0-9]{40}"]),
         "off": Redactor([])}[redactor]
    publish = r.publisher()
    secret = [i for i, e in enumerate(_EVENTS) if publish(e)[0] != msgspec.json.encode(e)]
    assert len(secret) > 20 or redactor == "off"
    # blocks cut around the secrets: one at the start, the end, alone, two in a row
    cuts = [(0, 50), (secret[0], secret[0] + 1), (secret[0] - 3, secret[0] + 1),
            (secret[1] - 1, secret[2] + 2), (0, len(_EVENTS))] if secret else [(0, 300)]
    for lo, hi in cuts:
        block = _EVENTS[max(0, lo):hi]
        out = io.BytesIO()
        replay_mod._event_writer(out, r)(block)
        assert out.getvalue() == b"".join(publish(e)[0] + b"\n" for e in block)


def test_the_suspects_are_the_events_whose_redacted_fields_hold_a_literal():
    """Redactor.suspects scans what `apply` reads of each event (not its envelope; a
    session id or providerRefs once for the events in a row that share it): it names
    every event whose non-envelope fields, encoded, hold a literal, so every event
    `apply` changes. A literal in the envelope (which `apply` never redacts) names none."""
    from msgspec.structs import replace

    from pipeline.privacy.redact import BUILTIN_PATTERNS, Redactor, _Scanned
    from topics.payloads.base import ProviderRefs

    secret = CORPUS[0].text
    assert CORPUS[0].secrets and all(s in secret for s in CORPUS[0].secrets)
    events = list(_EVENTS[:400])
    events[0] = replace(events[0], sessionId="s " + secret)  # the first
    events[-1] = replace(events[-1], providerRefs=ProviderRefs(providerItemId=secret))
    for i in range(100, 105):  # five in a row share the same (equal) providerRefs
        events[i] = replace(events[i], providerRefs=ProviderRefs(providerItemId="i " + secret))
    events[200] = replace(events[200], agentId=secret)  # two in a row
    events[201] = replace(events[201], parentAgentId="token: " + secret)
    events[300] = replace(events[300], eventId="token: " + secret)  # the envelope
    events[350:353] = [replace(e, sessionId="s2 " + secret) for e in events[350:353]]
    r = Redactor(list(BUILTIN_PATTERNS))
    which = r.suspects(events)

    def fields(e) -> bytes:
        return msgspec.json.encode(_Scanned(e.sessionId, e.agentId, e.parentAgentId,
                                            e.providerRefs, e.raw, e.payload))

    assert which == sorted(set(which))
    literal = {i for i, e in enumerate(events) if r._json_prefilter(fields(e)) is not None}
    assert {0, 100, 101, 102, 103, 104, 200, 201, 350, 351, 352, len(events) - 1} <= literal
    assert set(which) == literal and 300 not in which
    publish = r.publisher()
    changed = [i for i, e in enumerate(events) if publish(e)[0] != msgspec.json.encode(e)]
    assert literal - {300} <= set(changed) <= set(which)
    out = io.BytesIO()
    replay_mod._event_writer(out, r)(events)
    assert out.getvalue() == b"".join(publish(e)[0] + b"\n" for e in events)
    lines = out.getvalue().split(b"\n")
    for s in CORPUS[0].secrets:  # left only where apply never looks
        assert [i for i, line in enumerate(lines) if s.encode() in line] == [300]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 79), st.sampled_from(["sessionId", "refs", "agentId"]),
                          st.integers(1, 6), st.integers(0, len(CORPUS) - 1)), max_size=6))
def test_the_writer_is_publishing_each_event_whatever_shares_a_secret(runs):
    """Secrets in runs of events that share a session id or equal providerRefs (the
    fields Redactor.suspects checks once a run), anywhere in a block: the writer writes
    what publishing each event writes."""
    from msgspec.structs import replace

    from pipeline.privacy.redact import BUILTIN_PATTERNS, Redactor
    from topics.payloads.base import ProviderRefs

    events = list(_EVENTS[:80])
    for at, field, n, k in runs:
        text = CORPUS[k].text
        for i in range(at, min(at + n, len(events))):
            e = events[i]
            events[i] = (replace(e, sessionId=text) if field == "sessionId" else
                         replace(e, agentId=text) if field == "agentId" else
                         replace(e, providerRefs=ProviderRefs(providerTurnId=text)))
    r = Redactor(list(BUILTIN_PATTERNS))
    publish = r.publisher()
    out = io.BytesIO()
    replay_mod._event_writer(out, r)(events)
    assert out.getvalue() == b"".join(publish(e)[0] + b"\n" for e in events)


@pytest.mark.parametrize("redactor", ["default", "hook", "no-literal pattern", "off"])
def test_a_records_events_are_published_as_each_one_alone(redactor):
    """The worker publishes a record's events through Redactor.record_publisher: one
    prefilter scan for them all. It must publish exactly what publishing each event
    alone publishes (bytes, and the event the chat projection sees), for records cut
    around the secrets of the session and for the whole session as one record."""
    from pipeline.privacy.redact import BUILTIN_PATTERNS, Redactor

    r = {"default": Redactor(list(BUILTIN_PATTERNS)),
         "hook": Redactor(list(BUILTIN_PATTERNS), _hook),
         "no-literal pattern": Redactor([*BUILTIN_PATTERNS, r"[0-9]{40}"]),
         "off": Redactor([])}[redactor]
    one, record = r.publisher(), r.record_publisher()
    want = [one(e) for e in _EVENTS]
    secret = [i for i, (data, _) in enumerate(want) if data != msgspec.json.encode(_EVENTS[i])]
    assert len(secret) > 20 or redactor == "off"
    cuts = [(0, len(_EVENTS)), (0, 1), (0, 2)] + [
        (max(0, i - k), i + j) for i in secret[:12] for k in (0, 1, 3) for j in (1, 2)]
    for lo, hi in cuts:
        assert record(_EVENTS[lo:hi]) == want[lo:hi], (lo, hi)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 39), st.sampled_from(["text", "sessionId", "eventId"]),
                          st.integers(0, len(CORPUS) - 1)), max_size=5),
       st.integers(1, 40))
def test_a_record_with_secrets_anywhere_is_published_as_each_event_alone(secrets, size):
    """Secrets put in events' text, session id or envelope (which `apply` never
    redacts), in records of any size: the record publisher publishes what each event
    published alone does."""
    from msgspec.structs import replace

    from pipeline.privacy.redact import BUILTIN_PATTERNS, Redactor

    events = list(_EVENTS[:40])
    for at, field, k in secrets:
        text, e = CORPUS[k].text, events[at]
        events[at] = (replace(e, sessionId=text) if field == "sessionId" else
                      replace(e, eventId=text) if field == "eventId" else
                      replace(e, agentId=text))
    r = Redactor(list(BUILTIN_PATTERNS))
    one, record = r.publisher(), r.record_publisher()
    for lo in range(0, len(events), size):
        block = events[lo:lo + size]
        assert record(block) == [one(e) for e in block]


def test_forgetting_a_session_drops_its_state_and_open_chunks_and_nothing_else():
    """`canonflow import` translates sessions one after the other and forgets each when
    done: one session's state in memory, not every session's."""
    capture = (Path(__file__).resolve().parents[1] / "fixtures" / "captured" / "acp"
               / "acp-gemini__text.capture.jsonl")
    lines = [raw for _, raw in iter_lines(io.BytesIO(capture.read_bytes()))]
    rep, view = replay_mod.Replayer("acp"), replay_mod.ChatView()
    cut = next(n for n, raw in enumerate(lines) if b"agent_message_chunk" in raw) + 1
    for sid in ("a", "b"):  # each left with its answer open: its text spooled
        for offset, raw in enumerate(lines[:cut], 1):
            for ev in rep.feed(sid, offset, raw, "capture")[0]:
                view.feed(ev)
    assert {k[0] for k in rep.spool.chunks} == {"a", "b"}
    rep.forget("a")
    view.forget("a")
    assert set(rep.sessions) == set(view.sessions) == {"b"}
    assert {k[0] for k in rep.spool.chunks} == {"b"}
    assert {k[0] for k in view.spool.chunks} <= {"b"}


@pytest.mark.parametrize("provider", ["codex", "acp"])
@pytest.mark.parametrize(("before", "after"), [(1 << 20, 4096), (4096, 1 << 20), (8192, 2048)])
def test_an_item_cap_changed_mid_item_loses_nothing_it_does_not_say(provider, before, after):
    """A worker restarted with another CANONFLOW_ITEM_CAP finds items spooled under the
    old one. Each completion that carries a streamed text or output still carries it
    whole, or its start and end marked truncated with the whole length."""
    from pipeline.tools.bench_long_sessions import long_session
    from topics.canonical import ContentDelta, ItemCompleted

    # Codex's native completion carries an output up to 512 KiB: past it, canonflow
    # assembles the output from its deltas (the spooled case)
    session = long_session(CAPTURED, provider, (1 << 20) if provider == "codex" else 64 * 1024)
    rep = replay_mod.Replayer(provider, cap=before)
    streamed: dict[tuple[str, str], list[str]] = {}
    checked = 0
    for offset, line in enumerate(session.lines, 1):
        if offset == len(session.lines) // 2:
            rep.cap = after
        raw = b'{"origin":"%s","t":%d,"msg":%s}' % (line.origin.encode(), line.time_ms or 0,
                                                    line.data)
        events, dead = rep.feed("s", offset, raw, "capture")
        assert not dead
        for ev in events:
            p = ev.payload
            if isinstance(ev, ContentDelta):
                field = "output" if p.streamKind == "command_output" else "text"
                streamed.setdefault((ev.itemId, field), []).append(p.delta)
            elif isinstance(ev, ItemCompleted):
                for field in ("text", "output"):
                    whole = "".join(streamed.get((ev.itemId, field), []))
                    value = getattr(p, field, None)
                    if len(whole) < 1024 or not isinstance(value, str):
                        continue
                    checked += 1
                    if getattr(p, field + "Truncated", None) is True:
                        assert getattr(p, field + "Length") == len(whole)
                        assert value[:512] == whole[:512] and value[-512:] == whole[-512:]
                    else:
                        assert value == whole
    assert checked >= (3 if provider == "codex" else 1)


class _Discard:
    def write(self, data: bytes) -> int:
        return len(data)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("view", ["canonical", "chat"])
def test_replaying_many_files_keeps_one_files_session_not_every_files(tmp_path, view):
    """Each file is its session (its name), and what replay kept of it stayed to the end:
    the state and, for a file that ends in the middle of an answer, the answer's
    spooled text. A session is forgotten after its last file. Python's allocations,
    counted (tracemalloc), for 8 and 64 files each ending mid-answer."""
    import tracemalloc

    capture = CAPTURED / "acp" / "acp-gemini__text.capture.jsonl"
    lines = capture.read_bytes().splitlines(keepends=True)
    cut = next(n for n, raw in enumerate(lines) if b"agent_message_chunk" in raw) + 1
    chunk = json.loads(lines[cut - 1])
    chunk["msg"]["params"]["update"]["content"]["text"] = "x" * 20_000  # a long open answer
    body = b"".join(lines[:cut - 1]) + json.dumps(chunk).encode() + b"\n"
    peaks = []
    for files in (1, 8, 64):
        paths = []
        for n in range(files):
            path = tmp_path / f"{files}-{n}.capture.jsonl"
            path.write_bytes(body)
            paths.append(path)
        opened = [(str(p), open(p, "rb")) for p in paths]
        tracemalloc.start()
        try:
            replay("acp", opened, _Discard(), _Discard(), fmt="capture", view=view)  # type: ignore[arg-type]
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
            for _, fh in opened:
                fh.close()
    # the first run warms the caches; keeping every file's open answer would add 56
    # times its 20,000 characters from 8 files to 64 (the id caches add a little, bounded)
    assert peaks[2] - peaks[1] < 56 * 20_000 / 4, peaks
