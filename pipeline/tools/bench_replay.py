"""`canonflow bench`'s offline path: `canonflow replay` on one long Claude stream-json
file, beside a bare msgspec decode of the same file, and what redaction costs in it.

The workload is what `claude -p --output-format stream-json --include-partial-messages`
writes for a long session (the shapes of tests/fixtures/captured/claude's
`stream-json-partial` captures): turns of assistant messages streamed as partial
messages (message_start, a text block of 5-80 text deltas of 2-9 words, a Bash tool
call streamed as input_json_delta chunks, the whole `assistant` message, stops, usage),
the tool's result (3-30 lines of grep output) and the turn's `result`. About 380 bytes
a message, as the captured mix. Generated from a fixed seed: the same bytes every run.

Measured in one process, interleaved run by run, as CPU seconds of this process (each
measure is single-threaded; on a shared machine wall time counts the other processes'
work too, and a ratio is taken within a repetition, never across two; the redaction
rules are compiled before the first, as a process does once):

* bare decode: every line of the file through `msgspec.json.decode` (the ceiling: no
  translation can read the file faster);
* replay at default settings (`pipeline.tools.replay.replay`: reading, splitting,
  translation, redaction, encoding, writing to a file), and the same with redaction off
  (CANONFLOW_REDACT=off): the difference is what redaction costs the path;
* translation alone: every line through the translator (`Replayer.feed`, no hold
  policy), nothing encoded or written: the adapter core's cost per message, the floor
  under replay (replay/bare decode cannot exceed translation/bare decode);
* redaction alone: `Redactor.apply` on each canonical event of the workload, encoded as
  replay publishes it (the per-event cost), and the hold policy (`hold_point`) on
  each text delta's text as the conversation core asks it.
"""

from __future__ import annotations

import io
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import msgspec

_WORDS = ("the a to of and in file test function value return error config module import "
          "class request response session stream event worker topic record partition "
          "offset message handler cache update check build run path line").split()
_SID = "83acab83-a9f3-413b-bd63-22eeb44e3574"
_USAGE = {"input_tokens": 1200, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
          "output_tokens": 1, "service_tier": "standard"}


class _Writer:
    """Builds one Claude stream-json session, message by message (`lines`)."""

    def __init__(self, seed: int):
        self.rnd = random.Random(seed)
        self.enc = msgspec.json.Encoder()
        self.lines: list[bytes] = []

    def uid(self) -> str:
        h = "%032x" % self.rnd.getrandbits(128)  # noqa: UP031
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def words(self, n: int) -> str:
        return " ".join(self.rnd.choice(_WORDS) for _ in range(n))

    def add(self, msg: dict[str, Any]) -> None:
        self.lines.append(self.enc.encode(msg))

    def event(self, event: dict[str, Any], mid: str) -> None:
        self.add({"type": "stream_event", "event": event, "session_id": _SID,
                  "parent_tool_use_id": None, "uuid": self.uid(), "api_message_id": mid})

    def assistant(self, mid: str, content: list[dict[str, Any]]) -> None:
        self.add({"type": "assistant", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": "claude-opus-5-5",
            "content": content, "stop_reason": None, "stop_sequence": None, "usage": _USAGE,
            "context_management": None}, "parent_tool_use_id": None, "session_id": _SID,
            "uuid": self.uid(), "timestamp": "2026-11-29T18:15:12.816Z",
            "request_id": "req_" + self.uid().replace("-", "")[:24]})

    def message(self, deltas: int, tool: bool) -> None:
        """One assistant message, streamed: text, then a Bash call and its result."""
        mid = "msg_" + self.uid().replace("-", "")[:24]
        self.add({"type": "system", "subtype": "status", "status": "requesting",
                  "session_id": _SID, "uuid": self.uid()})
        self.event({"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": "claude-opus-5-5",
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": _USAGE}}, mid)
        self.event({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}, mid)
        parts = [self.words(self.rnd.randint(2, 9)) + " " for _ in range(deltas)]
        for p in parts:
            self.event({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": p}}, mid)
        self.assistant(mid, [{"type": "text", "text": "".join(parts)}])
        self.event({"type": "content_block_stop", "index": 0}, mid)
        tid = "toolu_" + self.uid().replace("-", "")[:26]
        if tool:
            self.event({"type": "content_block_start", "index": 1, "content_block": {
                "type": "tool_use", "id": tid, "name": "Bash", "input": {}}}, mid)
            tool_input = {"command": f"grep -rn '{self.words(2)}' src/ | head -40",
                          "description": self.words(4)}
            js = self.enc.encode(tool_input).decode()
            for chunk in ["", *(js[i:i + 16] for i in range(0, len(js), 16))]:
                self.event({"type": "content_block_delta", "index": 1, "delta": {
                    "type": "input_json_delta", "partial_json": chunk}}, mid)
            self.assistant(mid, [{"type": "tool_use", "id": tid, "name": "Bash",
                                  "input": tool_input}])
            self.event({"type": "content_block_stop", "index": 1}, mid)
        self.event({"type": "message_delta", "delta": {
            "stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None},
            "usage": {**_USAGE, "output_tokens": 42}}, mid)
        self.event({"type": "message_stop"}, mid)
        if tool:
            out = "\n".join(f"src/{self.rnd.choice(_WORDS)}.py:{self.rnd.randint(1, 900)}: "
                            f"{self.words(self.rnd.randint(3, 12))}"
                            for _ in range(self.rnd.randint(3, 30)))
            self.add({"type": "user", "message": {"role": "user", "content": [{
                "tool_use_id": tid, "type": "tool_result", "content": out, "is_error": False}]},
                "parent_tool_use_id": None, "session_id": _SID, "uuid": self.uid(),
                "timestamp": "2026-11-29T18:15:12.864Z",
                "tool_use_result": {"stdout": out, "stderr": "", "interrupted": False,
                                    "isImage": False, "noOutputExpected": False}})

    def turn(self) -> None:
        for _ in range(self.rnd.randint(1, 3)):
            self.message(self.rnd.randint(5, 60), tool=True)
        self.message(self.rnd.randint(10, 80), tool=False)
        self.add({"type": "result", "subtype": "success", "is_error": False,
                  "duration_ms": 4000, "duration_api_ms": 3900, "num_turns": 3,
                  "result": "done", "stop_reason": "end_turn", "session_id": _SID,
                  "total_cost_usd": 0.0113, "usage": {**_USAGE, "output_tokens": 84},
                  "uuid": self.uid()})


def claude_stream_json(messages: int, seed: int = 24) -> bytes:
    """One Claude stream-json session of at least `messages` native messages (whole
    turns), one per line, as the CLI writes it to stdout."""
    w = _Writer(seed)
    w.add({"type": "system", "subtype": "init", "cwd": "/sandbox/workspace", "session_id": _SID,
           "tools": ["Bash", "Edit", "Read", "Write"], "model": "claude-opus-5-5",
           "permissionMode": "default", "apiKeySource": "ANTHROPIC_API_KEY",
           "claude_code_version": "2.1.332"})
    while len(w.lines) < messages:
        w.turn()
    return b"\n".join(w.lines) + b"\n"


# ---------------------------------------------------------------------------
# The measures
# ---------------------------------------------------------------------------


def bare_decode_seconds(path: str) -> float:
    """Read the file and decode every line with msgspec: the ceiling."""
    start = time.process_time()
    decode = msgspec.json.decode
    with open(path, "rb") as fh:
        for line in fh:
            decode(line)
    return time.process_time() - start


def replay_seconds(path: str, redact: bool) -> tuple[float, int]:
    """`canonflow replay -p claude FILE > out` in this process: (seconds, events written).
    `redact` False runs it as CANONFLOW_REDACT=off does; True as the environment says
    (the default: on)."""
    from pipeline.tools.replay import replay

    saved = os.environ.get("CANONFLOW_REDACT")
    if not redact:
        os.environ["CANONFLOW_REDACT"] = "off"
    try:
        with tempfile.TemporaryFile() as out, open(path, "rb") as fh:
            err = io.BytesIO()
            start = time.process_time()
            dead = replay("claude", [(path, fh)], out, err)
            elapsed = time.process_time() - start
            out.seek(0)
            events = sum(chunk.count(b"\n") for chunk in iter(lambda: out.read(1 << 20), b""))
    finally:
        if saved is None:
            os.environ.pop("CANONFLOW_REDACT", None)
        else:
            os.environ["CANONFLOW_REDACT"] = saved
    if dead:
        raise RuntimeError(f"replay dead-lettered {dead} lines of the generated workload: "
                           f"{err.getvalue()[:500]!r}")
    return elapsed, events


def translate_seconds(path: str) -> float:
    """The adapter core alone: every line of the file through `Replayer.feed` (the
    translator, one line a record, no hold policy), the events kept nowhere: what no
    change to replay's reading, redaction, encoding or writing can go below."""
    from pipeline.tools.replay import Replayer, iter_blocks

    rep = Replayer("claude", hold=None)
    feed = rep.feed
    with open(path, "rb") as fh:
        start = time.process_time()
        offset = 0
        for lines in iter_blocks(fh):
            for raw in lines:
                offset += 1
                feed("bench", offset, raw, "native")
        return time.process_time() - start


def redaction_costs(path: str) -> dict[str, float]:
    """Microseconds per canonical event of `Redactor.apply` (the default rules), and per
    text delta of the hold policy, on the workload's own events."""
    from pipeline.privacy.redact import Redactor, hold_point
    from pipeline.tools.replay import Replayer, iter_lines
    from topics.canonical import ContentDeltaPayload, encode_event

    rep = Replayer("claude", hold=None)  # the deltas as the runtime cut them
    encoded: list[bytes] = []
    deltas: list[str] = []
    with open(path, "rb") as fh:
        for n, raw in iter_lines(fh):
            for ev in rep.feed("bench", n, raw, "native")[0]:
                encoded.append(encode_event(ev))
                if isinstance(ev.payload, ContentDeltaPayload):
                    deltas.append(ev.payload.delta)
    apply = Redactor.from_env({}).apply
    start = time.process_time()
    changed = sum(apply(e) is not e for e in encoded)
    per_event = (time.process_time() - start) / len(encoded)
    start = time.process_time()
    for d in deltas:
        hold_point(d)
    per_delta = (time.process_time() - start) / max(1, len(deltas))
    return {"events": len(encoded), "events_changed": changed, "deltas": len(deltas),
            "apply_us_per_event": per_event * 1e6, "hold_us_per_delta": per_delta * 1e6}


def run_replay_bench(messages: int, repeat: int,
                     say: Callable[[str], None]) -> dict[str, Any]:
    """The offline section of `canonflow bench` (see the module's docstring)."""
    data = claude_stream_json(messages)
    n = data.count(b"\n")
    with tempfile.NamedTemporaryFile(prefix="canonflow-bench-claude-", suffix=".jsonl",
                                     delete=False) as fh:
        fh.write(data)
        path = fh.name
    try:
        runs: list[dict[str, float]] = []
        events = 0
        # the rules compile once a process (40-90 ms, pipeline.privacy.compiled): before
        # the first run, not inside it, where it was the first repetition's redaction
        # (35% against 9-23% in the next two)
        from pipeline.privacy.redact import Redactor
        Redactor.from_env()
        for i in range(repeat):
            bare = bare_decode_seconds(path)
            # on then off, then off then on: a machine that slows down within a
            # repetition weighs on neither side
            if i % 2:
                off, _ = replay_seconds(path, redact=False)
                on, events = replay_seconds(path, redact=True)
            else:
                on, events = replay_seconds(path, redact=True)
                off, _ = replay_seconds(path, redact=False)
            alone = translate_seconds(path)
            runs.append({"bare_decode_msgs_per_s": n / bare, "replay_msgs_per_s": n / on,
                         "replay_redact_off_msgs_per_s": n / off,
                         "translate_msgs_per_s": n / alone,
                         "replay_vs_bare_decode": bare / on,
                         "translate_vs_bare_decode": bare / alone,
                         "translate_share_of_replay": alone / on,
                         "redaction_share_of_replay": max(0.0, on - off) / on})
            say(f"run {i + 1}/{repeat}: replay {n / on:,.0f} msg/s, bare decode "
                f"{n / bare:,.0f} msg/s ({bare / on:.3f}x), translation alone "
                f"{n / alone:,.0f} msg/s ({alone / on:.0%} of replay), redaction "
                f"{max(0.0, on - off) / on:.0%} of replay")
        costs = redaction_costs(path)
    finally:
        os.unlink(path)
    med = statistics.median
    return {"messages": n, "bytes_per_message": len(data) / n, "events": events,
            **{k: med(r[k] for r in runs) for k in runs[0]},
            "per_run": {k: [r[k] for r in runs] for k in runs[0]},
            "redaction": costs}


def format_replay_report(r: dict[str, Any]) -> list[str]:
    per = r["per_run"]
    red = r["redaction"]
    return [
        f"offline replay (canonflow replay -p claude, one file of {r['messages']:,} "
        f"stream-json messages, {r['bytes_per_message']:.0f} B each; CPU time)  msg/s",
        f"  bare msgspec decode of the file          {r['bare_decode_msgs_per_s']:>12,.0f}",
        f"  replay, default settings (redaction on)  {r['replay_msgs_per_s']:>12,.0f}",
        f"  replay, CANONFLOW_REDACT=off             {r['replay_redact_off_msgs_per_s']:>12,.0f}",
        f"  translation alone (the adapter core)     {r['translate_msgs_per_s']:>12,.0f}",
        f"ratio replay/bare decode = {r['replay_vs_bare_decode']:.3f} (within each run: "
        + " ".join(f"{x:.3f}" for x in per["replay_vs_bare_decode"]) + "); translation "
        f"alone/bare decode = {r['translate_vs_bare_decode']:.3f}, "
        f"{r['translate_share_of_replay']:.0%} of replay's time "
        f"({1e6 / r['translate_msgs_per_s']:.1f} us a message)",
        f"redaction's share of replay = {r['redaction_share_of_replay']:.0%} (within each "
        "run: " + " ".join(f"{x:.0%}" for x in per["redaction_share_of_replay"]) + ")",
        f"  Redactor.apply {red['apply_us_per_event']:.2f} us per event "
        f"({red['events']:,} events), hold_point {red['hold_us_per_delta']:.2f} us per "
        f"delta ({red['deltas']:,} deltas)",
    ]
