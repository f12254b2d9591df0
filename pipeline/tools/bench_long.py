"""`canonflow bench --long`: what one long session costs, per provider and size.

A long session is a real captured conversation (tests/fixtures/captured) whose final
assistant answer and whose shell command output were made long (64 KiB, 1 MiB, 8 MiB),
streamed one native message per record the way the runtime streams them:

* the answer gets more text deltas of 1 KiB (codex `item/agentMessage/delta`, claude
  `stream_event` text_delta, opencode `message.part.delta`, acp `agent_message_chunk`)
  until it reaches the size; the runtime's whole texts (codex `item/completed` and
  `turn/completed`, claude's `assistant` message and `result`, opencode's closing
  `message.part.updated`) are patched to match, so the translation stays consistent;
* the command output: where the runtime streams it (codex
  `item/commandExecution/outputDelta`) as 1 KiB deltas, then `item/completed` with
  `aggregatedOutput`; elsewhere whole in the completing message (claude's tool_result,
  opencode's completed tool part, acp's `tool_call_update` rawOutput).

No native record may exceed 1 MiB: the worker dead-letters a larger one untranslated
(CANONFLOW_MAX_RECORD_BYTES, by design), and the raw topics refuse them. So a message
that carries a text or an output whole carries at most WHOLE_MAX (512 KiB) of it, less
when the runtime repeats it within the message (claude: tool_result and stdout; acp:
stdout, aggregated_output, formatted_output), to fit RECORD_BUDGET:

* an answer longer than WHOLE_MAX is streamed as consecutive text items of at most
  WHOLE_MAX each (codex agentMessage items of one turn, claude text blocks of one
  message, opencode text parts of one message); acp never sends text whole, so its
  answer is one item of the full size;
* a streamed output longer than WHOLE_MAX completes with `aggregatedOutput: null` (the
  protocol allows it; the translator then completes the item from its deltas);
* a whole output is cut to what fits (the report says how long it was).

Every generated session is checked offline through `canonflow replay`'s Replayer: no
dead letter, the answer's deltas join to the intended answer, the command's output is
the intended output.

Then each session runs alone through the real worker (a fresh embedded broker,
`canonflow run` as a child process with the default settings but `batch_max=1`, so every
record is its own batch and rewrites its session's table value: the pace of a live
session, the worst case; only the session's provider, no web server). The worker first
translates the unpatched capture (a warm-up, under another key), so the session's time
does not include the worker's start. Measured per session: changelog bytes (the session's records
in this app's `sessions.<provider>` and `items.<provider>` changelogs), canonical and
chat bytes, each per native byte; the largest table value written; the worker's peak
RSS; the seconds from the first record produced to the last canonical event observed.
The canonical events are checked against the offline replay, event by event.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from adapters import Line
from pipeline.privacy.redact import Redactor
from pipeline.settings import Settings
from pipeline.tools.bench_kafka import BenchError, changelogs, fresh_broker, rss_mb
from pipeline.tools.bench_workload import timeless
from pipeline.tools.kafka_io import RawRecord
from pipeline.tools.replay import ChatView, Replayer, parse_line
from pipeline.worker.process import WorkerProcess, ensure_topics
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, raw_topic
from topics.chat import encode_chat

#: The default sizes of the answer and of the command output.
SIZES: tuple[int, ...] = (64 * 1024, 1024 * 1024, 8 * 1024 * 1024)
LONG_PROVIDERS: tuple[str, ...] = ("codex", "claude", "opencode", "acp")
#: The conversation each provider's long session is made from: a text answer after a
#: shell command, as the runtime streamed it (one of each provider's captures).
CAPTURES: dict[str, str] = {
    "codex": "codex/codex-app-server__tool_shell.capture.jsonl",
    "claude": "claude/claude-code-stream-json-partial__tool_shell.capture.jsonl",
    "opencode": "opencode/opencode-serve__tool_shell.capture.jsonl",
    "acp": "acp/acp-codex__tool_shell_allow.capture.jsonl",
}
#: Bytes per added text or output delta.
CHUNK = 1024
#: The most of a text or an output one native message carries whole.
WHOLE_MAX = 512 * 1024
#: The most one native record may hold here: below the worker's max_record_bytes
#: (1 MiB) and the producer's max request, with room for the record's overhead.
RECORD_BUDGET = 1024 * 1024 - 4096
#: OpenCode keeps at most this many characters of a running command's live output in
#: the tool part's `metadata.output` (then "..."), the completed part included.
OPENCODE_METADATA_MAX = 30_000
#: Targets shown beside each figure (issue 17).
TARGETS: dict[str, float] = {"changelog_per_native": 1.5, "canonical_per_native": 1.3,
                             "chat_per_native": 2.0, "largest_table_value": 64 * 1024}
_T0 = 1_764_000_000_000
_WARMUP = "bench-long-warmup"


def parse_sizes(text: str) -> list[int]:
    """'64k,1m,8m' -> sizes in bytes (k = KiB, m = MiB)."""
    sizes: list[int] = []
    for part in (p.strip().lower() for p in text.split(",")):
        if not part:
            continue
        unit = {"k": 1024, "m": 1024 * 1024}.get(part[-1], 0)
        if not unit or not part[:-1].isdigit() or int(part[:-1]) == 0:
            raise ValueError(f"size {part!r}: use a number of KiB or MiB, like 64k or 8m")
        sizes.append(int(part[:-1]) * unit)
    if not sizes:
        raise ValueError("no size given")
    return sizes


def size_label(n: int) -> str:
    return f"{n // 2**20}m" if n % 2**20 == 0 else f"{n // 1024}k" if n % 1024 == 0 else f"{n}b"


# ---------------------------------------------------------------------------
# The sessions
# ---------------------------------------------------------------------------


class LongSession(msgspec.Struct):
    provider: str
    session_id: str
    size: int
    lines: list[Line]
    #: the final answer as intended (all its items' text, in order) and its items
    answer: str
    answer_items: int
    #: the command's output as the canonical item.completed must carry it
    output: str
    #: True: streamed in deltas (which then join to `output`); False: whole
    output_streamed: bool

    @property
    def native_bytes(self) -> int:
        return sum(len(ln.data) for ln in self.lines)


def _msgs(path: Path) -> list[tuple[str, Any]]:
    """(origin, message) per line of a capture: the message's original bytes."""
    out: list[tuple[str, Any]] = []
    for raw in path.read_bytes().splitlines():
        if raw.strip():
            line = parse_line(raw, "capture")
            out.append((line.origin, line.data))
    return out


def _dict(msg: Any) -> dict[str, Any]:
    return msg if isinstance(msg, dict) else json.loads(msg)


def _encode(msg: Any) -> bytes:
    if isinstance(msg, bytes):
        return msg
    return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode()


def _copy(msg: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(msg))


def _chunks(text: str, size: int = CHUNK) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _segments(answer: str) -> list[str]:
    """The items of an answer the runtime also sends whole: pieces of at most WHOLE_MAX."""
    return [answer[i:i + WHOLE_MAX] for i in range(0, len(answer), WHOLE_MAX)] or [""]


def _filler(kind: str, start: str, size: int) -> str:
    """`start` continued with plain lines to exactly `size` characters (ASCII)."""
    parts = [start]
    n, total = 0, len(start)
    while total < size:
        if kind == "answer":
            line = (f"{n:07d} The answer goes on with one more plain sentence about the "
                    f"change, its reasons and what to check next.\n")
        else:
            line = f"{n:08d} build: compiling module_{n % 997:03d}.c -> module_{n % 997:03d}.o ok\n"
        parts.append(line)
        total += len(line)
        n += 1
    return "".join(parts)[:size]


def _fit(build: Callable[[str], bytes], whole: str) -> str:
    """The longest start of `whole` (at most WHOLE_MAX) whose record `build` makes fits
    RECORD_BUDGET (the runtime may repeat it within the message)."""
    text = whole[:WHOLE_MAX]
    while True:
        size = len(build(text))
        if size <= RECORD_BUDGET:
            return text
        copies = max(1, round((size - len(build(""))) / max(1, len(text))))
        text = text[:len(text) - (size - RECORD_BUDGET + copies - 1) // copies - 1]


def _uid(session: str, n: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"canonflow-bench-long/{session}/{n}"))


def _codex(msgs: list[tuple[str, Any]], sid: str, size: int
           ) -> tuple[list[tuple[str, Any]], str, int, str, bool]:
    parsed = [(o, _dict(m)) for o, m in msgs]
    final = next(m for _, m in reversed(parsed) if m.get("method") == "turn/completed")
    answer_id = final["params"]["turn"]["items"][-1]["id"]
    command_id = next(m["params"]["item"]["id"] for _, m in parsed
                      if m.get("method") == "item/started"
                      and m["params"]["item"]["type"] == "commandExecution")
    streamed = "".join(m["params"]["delta"] for _, m in parsed
                       if m.get("method") == "item/agentMessage/delta"
                       and m["params"]["itemId"] == answer_id)
    answer = _filler("answer", streamed, size)
    segments = _segments(answer)
    completed = next(m for _, m in parsed if m.get("method") == "item/completed"
                     and m["params"]["item"]["id"] == command_id)
    output = _filler("output", completed["params"]["item"].get("aggregatedOutput") or "", size)
    ids = [answer_id] + [f"{answer_id}_{k}" for k in range(1, len(segments))]
    out: list[tuple[str, Any]] = []
    for (origin, raw), (_, m) in zip(msgs, parsed, strict=True):
        method = m.get("method")
        p: dict[str, Any] = m.get("params") or {}
        item: dict[str, Any] = p["item"] if isinstance(p.get("item"), dict) else {}
        if method == "item/started" and item.get("id") == command_id:
            out.append((origin, raw))
            for chunk in _chunks(output):
                out.append(("agent", {"method": "item/commandExecution/outputDelta", "params": {
                    "threadId": p["threadId"], "turnId": p["turnId"], "itemId": command_id,
                    "delta": chunk}, "emittedAtMs": m.get("emittedAtMs")}))
        elif method == "item/completed" and item.get("id") == command_id:
            msg = _copy(m)
            msg["params"]["item"]["aggregatedOutput"] = output if len(output) <= WHOLE_MAX else None
            out.append((origin, msg))
        elif method == "item/started" and item.get("id") == answer_id:
            started = m
            out.append((origin, raw))
        elif method == "item/agentMessage/delta" and p.get("itemId") == answer_id:
            delta = m
            out.append((origin, raw))
        elif method == "item/completed" and item.get("id") == answer_id:
            for k, (segment, item_id) in enumerate(zip(segments, ids, strict=True)):
                if k:
                    msg = _copy(started)
                    msg["params"]["item"]["id"] = item_id
                    out.append(("agent", msg))
                for chunk in _chunks(segment[len(streamed):] if k == 0 else segment):
                    msg = _copy(delta)
                    msg["params"].update(itemId=item_id, delta=chunk)
                    out.append(("agent", msg))
                msg = _copy(m)
                msg["params"]["item"].update(id=item_id, text=segment)
                out.append((origin, msg))
        elif method == "turn/completed":
            msg = _copy(m)
            msg["params"]["turn"]["items"][-1].update(id=ids[-1], text=segments[-1])
            out.append((origin, msg))
        else:
            out.append((origin, raw))
    return out, answer, len(segments), output, True


def _claude(msgs: list[tuple[str, Any]], sid: str, size: int
            ) -> tuple[list[tuple[str, Any]], str, int, str, bool]:
    parsed = [(o, _dict(m)) for o, m in msgs]
    answer_msg = next(m["message"]["id"] for _, m in reversed(parsed)
                      if m.get("type") == "assistant"
                      and m["message"]["content"][0].get("type") == "text")

    def of_answer(m: dict[str, Any], kind: str) -> bool:
        return (m.get("type") == "stream_event" and m.get("api_message_id") == answer_msg
                and m["event"]["type"] == kind)

    streamed = "".join(m["event"]["delta"]["text"] for _, m in parsed
                       if of_answer(m, "content_block_delta"))
    answer = _filler("answer", streamed, size)
    segments = _segments(answer)
    tool_result = next(m for _, m in parsed if m.get("type") == "user"
                       and isinstance(m.get("tool_use_result"), dict))
    original = tool_result["tool_use_result"]["stdout"]
    full = _filler("output", original, size)

    def user_line(text: str) -> dict[str, Any]:
        msg = _copy(tool_result)
        msg["message"]["content"][0]["content"] = text
        msg["tool_use_result"]["stdout"] = text
        return msg

    output = _fit(lambda t: _encode(user_line(t)), full)
    uid = iter(range(1 << 30))
    out: list[tuple[str, Any]] = []
    templates: dict[str, dict[str, Any]] = {}
    for (origin, raw), (_, m) in zip(msgs, parsed, strict=True):
        if m is tool_result:
            out.append((origin, user_line(output)))
        elif of_answer(m, "content_block_start"):
            templates["start"] = m
            out.append((origin, raw))
        elif of_answer(m, "content_block_delta"):
            templates["delta"] = m
            out.append((origin, raw))
        elif m.get("type") == "assistant" and m["message"]["id"] == answer_msg:
            templates["assistant"] = m
            for chunk in _chunks(segments[0][len(streamed):]):
                msg = _copy(templates["delta"])
                msg["event"]["delta"]["text"] = chunk
                msg["uuid"] = _uid(sid, next(uid))
                out.append(("agent", msg))
            msg = _copy(m)
            msg["message"]["content"][0]["text"] = segments[0]
            out.append((origin, msg))
        elif of_answer(m, "content_block_stop"):
            out.append((origin, raw))
            # the answer's further text blocks, in the same message, as Claude Code
            # streams each block: start, deltas, the block's assistant line, stop
            for k, segment in enumerate(segments[1:], 1):
                for kind, body in (("start", None), *(("delta", c) for c in _chunks(segment)),
                                   ("assistant", segment), ("stop", None)):
                    msg = _copy(templates[kind] if kind != "stop" else m)
                    if kind == "assistant":
                        msg["message"]["content"][0]["text"] = body
                    else:
                        msg["event"]["index"] = k
                        if kind == "delta":
                            msg["event"]["delta"]["text"] = body
                    msg["uuid"] = _uid(sid, next(uid))
                    out.append(("agent", msg))
        elif m.get("type") == "result":
            msg = _copy(m)
            msg["result"] = segments[-1]
            out.append((origin, msg))
        else:
            out.append((origin, raw))
    return out, answer, len(segments), output, False


def _opencode(msgs: list[tuple[str, Any]], sid: str, size: int
              ) -> tuple[list[tuple[str, Any]], str, int, str, bool]:
    parsed = [(o, _dict(m)) for o, m in msgs]

    def part(m: dict[str, Any]) -> dict[str, Any]:
        return (m.get("properties") or {}).get("part") or {}

    deltas = [m for _, m in parsed if m.get("type") == "message.part.delta"]
    answer_part = deltas[-1]["properties"]["partID"]
    streamed = "".join(m["properties"]["delta"] for m in deltas
                       if m["properties"]["partID"] == answer_part)
    answer = _filler("answer", streamed, size)
    segments = _segments(answer)
    done_tool = next(m for _, m in parsed if m.get("type") == "message.part.updated"
                     and part(m).get("type") == "tool"
                     and part(m)["state"]["status"] == "completed")
    full = _filler("output", done_tool["properties"]["part"]["state"]["output"], size)

    def tool_line(text: str) -> dict[str, Any]:
        msg = _copy(done_tool)
        state = msg["properties"]["part"]["state"]
        state["output"] = text
        state["metadata"]["output"] = (text if len(text) <= OPENCODE_METADATA_MAX
                                       else text[:OPENCODE_METADATA_MAX] + "\n\n...")
        return msg

    output = _fit(lambda t: _encode(tool_line(t)), full)
    ids = iter(range(1 << 30))
    out: list[tuple[str, Any]] = []
    opened: dict[str, Any] | None = None
    delta: dict[str, Any] | None = None
    for (origin, raw), (_, m) in zip(msgs, parsed, strict=True):
        kind = m.get("type")
        if m is done_tool:
            out.append((origin, tool_line(output)))
        elif kind == "message.part.updated" and part(m).get("id") == answer_part:
            if "end" not in (part(m).get("time") or {}):
                opened = m
                out.append((origin, raw))
                continue
            assert opened is not None and delta is not None
            for k, segment in enumerate(segments):
                pid = answer_part if k == 0 else f"{answer_part}{k:04d}"
                if k:
                    msg = _copy(opened)
                    msg["id"] = f"{opened['id']}{next(ids):06d}"
                    msg["properties"]["part"]["id"] = pid
                    out.append(("agent", msg))
                for chunk in _chunks(segment[len(streamed):] if k == 0 else segment):
                    msg = _copy(delta)
                    msg["id"] = f"{delta['id']}{next(ids):06d}"
                    msg["properties"].update(partID=pid, delta=chunk)
                    out.append(("agent", msg))
                msg = _copy(m)
                if k:
                    msg["id"] = f"{m['id']}{next(ids):06d}"
                msg["properties"]["part"].update(id=pid, text=segment)
                out.append((origin, msg))
        elif kind == "message.part.delta" and m["properties"]["partID"] == answer_part:
            delta = m
            out.append((origin, raw))
        else:
            out.append((origin, raw))
    return out, answer, len(segments), output, False


def _acp(msgs: list[tuple[str, Any]], sid: str, size: int
         ) -> tuple[list[tuple[str, Any]], str, int, str, bool]:
    parsed = [(o, _dict(m)) for o, m in msgs]

    def update(m: dict[str, Any]) -> dict[str, Any]:
        return (m.get("params") or {}).get("update") or {} if m.get("method") == "session/update" \
            else {}

    chunks = [i for i, (_, m) in enumerate(parsed)
              if update(m).get("sessionUpdate") == "agent_message_chunk"]
    # the answer: the last run of consecutive message chunks (ACP has no item ids)
    last = chunks[-1]
    first = last
    while first - 1 in chunks:
        first -= 1
    streamed = "".join(update(parsed[i][1])["content"]["text"] for i in range(first, last + 1))
    answer = _filler("answer", streamed, size)
    done_tool = next(m for _, m in parsed if update(m).get("sessionUpdate") == "tool_call_update"
                     and update(m).get("status") == "completed")
    raw_output = update(done_tool)["rawOutput"]
    full = _filler("output", raw_output.get("aggregated_output") or "", size)

    def tool_line(text: str) -> dict[str, Any]:
        msg = _copy(done_tool)
        record = msg["params"]["update"]["rawOutput"]
        record.update(stdout=text, aggregated_output=text, formatted_output=text)
        return msg

    output = _fit(lambda t: _encode(tool_line(t)), full)
    out: list[tuple[str, Any]] = []
    for i, ((origin, raw), (_, m)) in enumerate(zip(msgs, parsed, strict=True)):
        if m is done_tool:
            out.append((origin, tool_line(output)))
            continue
        out.append((origin, raw))
        if i == last:
            for chunk in _chunks(answer[len(streamed):]):
                msg = _copy(m)
                msg["params"]["update"]["content"]["text"] = chunk
                out.append(("agent", msg))
    return out, answer, 1, output, False


_PATCHERS = {"codex": _codex, "claude": _claude, "opencode": _opencode, "acp": _acp}


def captured_lines(fixtures: Path, provider: str) -> list[Line]:
    """The provider's source conversation as it was captured (capture times added)."""
    return [Line(_encode(m), o, _T0 + 10 * i)  # type: ignore[arg-type]
            for i, (o, m) in enumerate(_msgs(fixtures / CAPTURES[provider]))]


def long_session(fixtures: Path, provider: str, size: int, session_id: str | None = None
                 ) -> LongSession:
    """The provider's captured conversation with its answer and command output made
    `size` characters long (see the module docstring)."""
    sid = session_id or f"long-{provider}-{size_label(size)}"
    msgs, answer, items, output, streamed = _PATCHERS[provider](
        _msgs(fixtures / CAPTURES[provider]), sid, size)
    lines = [Line(_encode(m), o, _T0 + 10 * i)  # type: ignore[arg-type]
             for i, (o, m) in enumerate(msgs)]
    too_big = [len(ln.data) for ln in lines if len(ln.data) > RECORD_BUDGET]
    if too_big:
        raise BenchError(f"{sid}: native records of {too_big} bytes exceed {RECORD_BUDGET}")
    return LongSession(provider, sid, size, lines, answer, items, output, streamed)


def capture_bytes(session: LongSession) -> bytes:
    """The session as a capture file (`canonflow replay --format capture`)."""
    return b"".join(b'{"origin":"%s","t":%d,"msg":%s}\n' % (ln.origin.encode(), ln.time_ms or 0,
                                                            ln.data) for ln in session.lines)


# ---------------------------------------------------------------------------
# The offline check (canonflow replay)
# ---------------------------------------------------------------------------


class Replayed(msgspec.Struct):
    events: list[bytes]  # encoded as published (redacted), createdAt removed
    chat: int  # chat records
    chat_bytes: int


def replay_session(session: LongSession, lines: Iterable[Line] | None = None,
                   session_id: str | None = None) -> Replayed:
    """`canonflow replay --format capture` of the session (its Replayer, the worker's
    default redaction, the chat view): its canonical events and chat records. Raises
    BenchError on a dead letter."""
    sid = session_id or session.session_id
    rep = Replayer(session.provider)
    chat = ChatView()
    publish = Redactor.from_env({}).publisher()  # the worker's: CANONFLOW_* not inherited
    events: list[bytes] = []
    n_chat = chat_bytes = 0
    for offset, line in enumerate(lines if lines is not None else session.lines, 1):
        raw = b'{"origin":"%s","t":%d,"msg":%s}' % (line.origin.encode(), line.time_ms or 0,
                                                    line.data)
        evs, dead = rep.feed(sid, offset, raw, "capture")
        if dead:
            raise BenchError(f"{sid}: line {offset} was dead-lettered: {dead[0].reason}")
        for ev in evs:
            data, published = publish(ev)
            events.append(timeless(data))
            for record in chat.feed(published) if published is not None else []:
                n_chat += 1
                chat_bytes += len(encode_chat(record))
    return Replayed(events, n_chat, chat_bytes)


def check_session(session: LongSession, replayed: Replayed) -> None:
    """The answer's deltas join to the intended answer; the command's output is the
    intended one (deltas and completion). Raises BenchError."""
    texts: dict[str, list[str]] = {}
    output_deltas: list[str] = []
    outputs: list[dict[str, Any]] = []
    for data in replayed.events:
        ev = json.loads(data)
        p = ev.get("payload") or {}
        if ev["type"] == "content.delta" and p.get("streamKind") == "assistant_text":
            texts.setdefault(ev.get("itemId", ""), []).append(p["delta"])
        elif ev["type"] == "content.delta" and p.get("streamKind") == "command_output":
            output_deltas.append(p["delta"])
        elif ev["type"] == "item.completed" and "output" in p:
            outputs.append(p)
    sid = session.session_id
    answer = "".join("".join(parts) for parts in list(texts.values())[-session.answer_items:])
    if answer != session.answer:
        raise BenchError(f"{sid}: the answer's deltas join to {len(answer)} characters, not "
                         f"the intended {len(session.answer)}")
    if session.output_streamed and "".join(output_deltas) != session.output:
        raise BenchError(f"{sid}: the command's output deltas are not the intended output")
    if not any(p.get("output") == session.output
               or (p.get("outputTruncated") and p.get("outputLength") == len(session.output))
               for p in outputs):
        raise BenchError(f"{sid}: no completed item carries the intended output")


# ---------------------------------------------------------------------------
# Through the worker
# ---------------------------------------------------------------------------


class Drive(msgspec.Struct):
    events: list[bytes]  # the session's canonical events (values), in order
    canonical_bytes: int
    chat: int
    chat_bytes: int
    first_produced: float
    last_canonical: float


async def _drive(live: Settings, warmup: list[RawRecord], warm_events: int,
                 session: LongSession, want_events: int, want_chat: int, timeout: float,
                 alive: Callable[[], bool]) -> Drive:
    """Produce the warm-up conversation and wait for its events (the worker is then
    running), then produce the session, observing agents.canonical and agents.chat
    until all of its events and chat records arrived."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from pipeline.cluster.admin import kafka_client_kwargs

    kw = kafka_client_kwargs(live)
    consumer = AIOKafkaConsumer(CANONICAL_TOPIC, CHAT_TOPIC, **kw, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                fetch_max_bytes=64 * 1024 * 1024,
                                max_partition_fetch_bytes=32 * 1024 * 1024)
    producer = AIOKafkaProducer(**kw, linger_ms=5, max_batch_size=256 * 1024)
    await consumer.start()
    await producer.start()
    topic = raw_topic(session.provider)
    sid, warm = session.session_id.encode(), _WARMUP.encode() + b"-" + session.session_id.encode()
    events: list[bytes] = []
    counts = {"warm": 0, "chat": 0, "chat_bytes": 0, "canonical_bytes": 0}
    last = 0.0
    deadline = time.monotonic() + timeout

    async def send(key: bytes, records: list[RawRecord]) -> None:
        futures = [await producer.send(topic, r.value, key=key, headers=r.headers())
                   for r in records]
        await asyncio.gather(*futures)

    async def consume(done: Callable[[], bool]) -> None:
        nonlocal last
        while not done():
            if time.monotonic() > deadline or not alive():
                return
            batch = await consumer.getmany(timeout_ms=200, max_records=100_000)
            now = time.perf_counter()
            for tp, recs in batch.items():
                for r in recs:
                    if r.key == warm and tp.topic == CANONICAL_TOPIC:
                        counts["warm"] += 1
                    elif r.key != sid:
                        continue
                    elif tp.topic == CANONICAL_TOPIC:
                        events.append(r.value)
                        counts["canonical_bytes"] += len(r.value)
                        last = now
                    else:
                        counts["chat"] += 1
                        counts["chat_bytes"] += len(r.value)

    try:
        await send(warm, warmup)
        await consume(lambda: counts["warm"] >= warm_events)
        if counts["warm"] < warm_events:
            raise BenchError(f"the worker did not translate the warm-up conversation "
                             f"({counts['warm']} of {warm_events} events)")
        first = time.perf_counter()
        sending = asyncio.ensure_future(send(sid, [RawRecord(ln.data, ln.origin, ln.time_ms)
                                                   for ln in session.lines]))
        await consume(lambda: len(events) >= want_events and counts["chat"] >= want_chat)
        await sending
    finally:
        await producer.stop()
        await consumer.stop()
    return Drive(events, counts["canonical_bytes"], counts["chat"], counts["chat_bytes"],
                 first, last)


def run_long_session(settings: Settings, session: LongSession, expected: Replayed,
                     fixtures: Path, timeout: float) -> dict[str, Any]:
    """One session alone through a worker of its own on a fresh embedded broker."""
    broker, live = fresh_broker(settings)
    log = tempfile.NamedTemporaryFile(prefix="canonflow-bench-long-", suffix=".log",
                                      delete=False)
    log.close()
    try:
        live = live.replace(app_id=f"bench-long-{os.getpid()}-{session.session_id}",
                            web_enabled=False, batch_max=1, providers=(session.provider,),
                            data_dir=tempfile.mkdtemp(prefix="canonflow-bench-long-"))
        ensure_topics(live)
        warm_lines = captured_lines(fixtures, session.provider)
        warm_sid = f"{_WARMUP}-{session.session_id}"
        warm_events = len(replay_session(session, warm_lines, warm_sid).events)
        warmup = [RawRecord(ln.data, ln.origin, ln.time_ms) for ln in warm_lines]
        worker = WorkerProcess(live, log_path=log.name).start()
        try:
            drive = asyncio.run(_drive(live, warmup, warm_events, session,
                                       len(expected.events), expected.chat, timeout,
                                       alive=worker.alive))
            rss = rss_mb(worker.pid)
        finally:
            worker.stop()
        got = [timeless(v) for v in drive.events]
        if got != expected.events:
            raise BenchError(f"{session.session_id}: {len(got)} canonical events differ from "
                             f"the offline replay's {len(expected.events)} (worker log: "
                             f"{log.name})")
        if drive.chat != expected.chat:
            raise BenchError(f"{session.session_id}: {drive.chat} chat records, the offline "
                             f"replay gives {expected.chat} (worker log: {log.name})")
        stats: dict[str, Any] = {}
        _, _, changelog = asyncio.run(changelogs(live, session=session.session_id.encode(),
                                                  stats=stats))
    finally:
        if broker:
            broker.stop()
    native = session.native_bytes
    return {
        "provider": session.provider,
        "size": size_label(session.size),
        "records": len(session.lines),
        "answer_chars": len(session.answer),
        "answer_items": session.answer_items,
        "output_chars": len(session.output),
        "output_streamed": session.output_streamed,
        "native_bytes": native,
        "changelog_bytes": changelog,
        "changelog_records": stats.get("records", 0),
        # per table: the session states' and the items' spooled chunks (and the chat's)
        "changelog_bytes_by_table": stats.get("by_table", {}),
        "canonical_bytes": drive.canonical_bytes,
        "chat_bytes": drive.chat_bytes,
        "changelog_per_native": changelog / native,
        "canonical_per_native": drive.canonical_bytes / native,
        "chat_per_native": drive.chat_bytes / native,
        "largest_table_value": stats.get("largest_value", 0),
        "largest_table_key": stats.get("largest_key", ""),
        "worker_peak_rss_mb": rss,
        "seconds": drive.last_canonical - drive.first_produced,
        "events": len(got),
        "chat_records": drive.chat,
        "verified": True,
    }


def run_long_bench(settings: Settings, *, sizes: Iterable[int] = SIZES,
                   providers: Iterable[str] = LONG_PROVIDERS,
                   fixtures: Path | None, timeout: float, say: Callable[[str], None]
                   ) -> dict[str, Any]:
    """Every (provider, size) session: generated, checked offline, then run through the
    worker; the figures of each, in one result."""
    from pipeline.tools.bench_workload import default_fixtures

    fixtures = fixtures or (Path(__file__).resolve().parents[2] / "tests" / "fixtures"
                            / "captured")
    if not fixtures.is_dir():
        fixtures = default_fixtures()
    rows: list[dict[str, Any]] = []
    start = time.monotonic()
    sizes, providers = list(sizes), list(providers)
    for size in sizes:
        for provider in providers:
            session = long_session(fixtures, provider, size)
            expected = replay_session(session)
            check_session(session, expected)
            say(f"{session.session_id}: {len(session.lines):,} records, "
                f"{session.native_bytes / 2**20:.1f} MiB native, replay checked "
                f"({len(expected.events):,} events)")
            row = run_long_session(settings, session, expected, fixtures, timeout)
            say(f"{session.session_id}: {row['seconds']:.1f} s through the worker, "
                f"{row['events']:,} events verified")
            rows.append(row)
    return {
        "workload": {"sizes": [size_label(n) for n in sizes], "providers": providers, "chunk": CHUNK,
                     "whole_max": WHOLE_MAX, "batch_max": 1, "partitions": settings.partitions,
                     "seconds": time.monotonic() - start},
        "targets": TARGETS,
        "sessions": rows,
    }


def _mark(value: float, target: float) -> str:
    return "ok" if value <= target else "OVER"


def format_long_report(r: dict[str, Any]) -> str:
    w, t = r["workload"], r["targets"]
    lines = [
        f"canonflow bench --long: one session per provider and size, one native message per "
        f"record, through a worker with batch_max=1 (every record its own batch), "
        f"{w['partitions']} partitions, {w['seconds']:.0f} s in all",
        f"(answer text in {w['chunk']}-byte deltas; a native message carries a text or an "
        f"output whole up to {w['whole_max'] // 1024} KiB, its record up to 1 MiB)",
        "",
        f"  {'session':<14}{'records':>9}  {'native MiB':>10}  {'answer chars (items)':>20}  "
        f"{'output chars':>14}",
    ]
    for s in r["sessions"]:
        how = "in deltas" if s["output_streamed"] else "whole"
        label = f"{s['provider']} {s['size']}"
        lines.append(f"  {label:<14}{s['records']:>9,}  {s['native_bytes'] / 2**20:>10.2f}  "
                     f"{s['answer_chars']:>15,} ({s['answer_items']:>2})  "
                     f"{s['output_chars']:>14,} {how}")
    ratios = ("changelog_per_native", "canonical_per_native", "chat_per_native")
    lines += [
        "",
        f"  {'per native byte':<16}" + "".join(f"{h:<15}" for h in ("changelog", "canonical",
                                                                   "chat"))
        + "largest table value   peak RSS   seconds  verified",
        f"  {'target':<16}" + "".join(f"{'<= ' + format(t[k], '.1f') + 'x':<15}" for k in ratios)
        + f"<= {t['largest_table_value'] / 1024:.0f} KiB",
    ]
    for s in r["sessions"]:
        label = f"{s['provider']} {s['size']}"
        cells = "".join(f"{format(s[k], '.2f') + 'x ' + _mark(s[k], t[k]):<15}" for k in ratios)
        largest = s["largest_table_value"]
        lines.append(f"  {label:<16}{cells}"
                     f"{format(largest / 1024, '.1f') + ' KiB ' + _mark(largest, t['largest_table_value']):<20}"
                     f"{s['worker_peak_rss_mb']:>6.0f} MB {s['seconds']:>8.1f}  "
                     f"{'yes' if s['verified'] else 'NO'}")
    lines += ["", f"  {'changelog':<16}{'sessions.<p>':<15}{'items.<p>':<15}"
                  f"largest table value: table, key (session/stream/chunk)"]
    for s in r["sessions"]:
        native = s["native_bytes"]
        by = {k.split(".")[0]: v for k, v in s.get("changelog_bytes_by_table", {}).items()}
        lines.append(f"  {s['provider'] + ' ' + s['size']:<16}"
                     f"{format(by.get('sessions', 0) / native, '.2f') + 'x':<15}"
                     f"{format(by.get('items', 0) / native, '.2f') + 'x':<15}"
                     f"{s.get('largest_table_key', '')}")
    return "\n".join(lines) + "\n"
