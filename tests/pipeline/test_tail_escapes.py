"""`canonflow tail` never hands a terminal the control characters in what it prints
(issue 25, finding 2).

Agent output and session ids are whatever a runtime or a producer wrote: OSC 52 sets
the clipboard, OSC 0 the window title, CSI 2J clears the screen, and C1 controls do
the same in one character. A hostile session goes through the embedded broker and a
real worker; records forged straight onto the output topics (raw escapes, a lone
surrogate, JSON that is no object, bytes that are no UTF-8, a tombstone) join it; then
the real `canonflow tail` command runs in a child process in every view, and its
output must hold no C0 control but newline and tab, no DEL, no C1 control, and show
each escape instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.cluster.broker import EmbeddedBroker
from pipeline.settings import Settings
from pipeline.tools.kafka_io import RawRecord, follow, produce
from pipeline.views.render import ChatRenderer, describe, render, visible
from pipeline.worker.process import WorkerProcess, embedded_settings, ensure_topics
from tests.pipeline.conftest import read_topic
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[2]
OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # the clipboard := "echo pwned"
TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H\x1bc"
C1 = "\x9b2J\x9d0;c1-title\x9c"
OTHERS = "\x07\x08\r\x00\x7f"
HOSTILE = OSC52 + TITLE + CLEAR + C1 + OTHERS
SESSION = "evil" + TITLE + "\x9b2J\n"
T0 = 1_764_000_000_000

#: What a terminal must never get: C0 but newline and tab, DEL, C1.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def hostile_session() -> list[RawRecord]:
    """A codex exec session whose answer, command and output carry the escapes, and a
    line that is no JSON (dead-lettered with its bytes)."""
    msgs: list[Any] = [
        {"type": "thread.started", "thread_id": "01a22884-6c3f-7ac1-93a2-741553fb3503"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message",
                                            "text": "hello " + HOSTILE + " bye"}},
        {"type": "item.started", "item": {"id": "item_1", "type": "command_execution",
                                          "command": "printf '" + CLEAR + "'",
                                          "aggregated_output": "", "exit_code": None,
                                          "status": "in_progress"}},
        {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution",
                                            "command": "printf '" + CLEAR + "'",
                                            "aggregated_output": OSC52 + "\nline 2 " + C1 + "\n",
                                            "exit_code": 0, "status": "completed"}},
        "{not json " + OSC52,
        {"type": "turn.completed", "usage": {"input_tokens": 1, "cached_input_tokens": 0,
                                             "output_tokens": 1}},
    ]
    return [RawRecord((m if isinstance(m, str) else json.dumps(m, ensure_ascii=False)).encode(),
                      "agent", T0 + 10 * i) for i, m in enumerate(msgs)]


#: Records written straight onto agents.canonical and agents.chat by something else.
FORGED: list[bytes | None] = [
    b"\x1b]52;c;Zm9yZ2Vk\x07 not json",
    json.dumps({"type": "runtime.warning", "sessionId": "forged" + TITLE, "seq": {"x": C1},
                "provider": ["\x1b[2J"], "payload": {"message": "\ud800 " + OSC52}}).encode(),
    json.dumps({"type": "text", "session_id": "forged" + TITLE, "provider": "x" + C1,
                "seq": 1, "item_id": "i", "content": OSC52 + "\ud800"}).encode(),
    json.dumps({"type": "tool_result", "session_id": "forged", "seq": 2,
                "content": ["\x1b[2J", C1], "tool_use_id": 5}, ensure_ascii=False).encode(),
    json.dumps({"type": {"t": TITLE}, "payload": [OSC52]}, ensure_ascii=False).encode(),
    json.dumps(["\x1b[2J", C1], ensure_ascii=False).encode(),
    b"\xff\xfe" + CLEAR.encode() + "\x9b".encode(),
    None,
]


async def forge(settings: Settings) -> None:
    from aiokafka import AIOKafkaProducer

    from pipeline.cluster.admin import kafka_client_kwargs

    producer = AIOKafkaProducer(**kafka_client_kwargs(settings), acks="all")
    await producer.start()
    try:
        for topic in (CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC):
            for value in FORGED:
                await producer.send_and_wait(topic, value, key=b"forged\x1b]0;t\x07")
    finally:
        await producer.stop()


def topic_size(settings: Settings, topic: str) -> int:
    """Records on `topic` (the broker is this module's own)."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    from pipeline.cluster.admin import kafka_client_kwargs

    async def go() -> int:
        consumer = AIOKafkaConsumer(**kafka_client_kwargs(settings), group_id=None)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(settings.partitions)]
            starts = await consumer.beginning_offsets(tps)
            ends = await consumer.end_offsets(tps)
            return sum(ends[tp] - starts[tp] for tp in tps)
        finally:
            await consumer.stop()

    return asyncio.run(go())


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    tmp = tmp_path_factory.mktemp("tail")
    with EmbeddedBroker(log_path=str(tmp / "tansu.log")) as broker:
        s = Settings(app_id="canonflow-tail-escapes", partitions=2, web_enabled=False,
                     data_dir=str(tmp / "data"))
        s = embedded_settings(s, broker.url)
        ensure_topics(s)
        worker = WorkerProcess(s, log_path=str(tmp / "worker.log")).start()
        try:
            asyncio.run(produce(s, "codex-exec", SESSION, hostile_session()))
            key = SESSION.encode()
            # the whole session translated: its turn completed, in both output topics
            for topic, last in ((CANONICAL_TOPIC, "turn.completed"), (CHAT_TOPIC, "done")):
                wait_for_type(s, topic, key, last, worker)
            read_topic(s, DEADLETTER_TOPIC, 1, key=key, worker=worker)
        finally:
            worker.stop()
        asyncio.run(forge(s))
        yield s


def wait_for_type(settings: Settings, topic: str, key: bytes, wanted: str,
                  worker: WorkerProcess) -> None:
    seen: list[str] = []

    def take(rec: Any) -> bool:
        if rec.key == key:
            seen.append(json.loads(rec.value)["type"])
        return wanted in seen

    asyncio.run(follow(settings, [topic], take, give_up=lambda: not worker.alive()))
    assert wanted in seen, f"no {wanted} on {topic}; see {worker.log_path}"


def tail(settings: Settings, *args: str, topic: str) -> str:
    """The real command in a child process, reading the topic from its beginning until
    it has printed every record on it; its stdout, which must be UTF-8."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "tail", "--broker", settings.broker,
         "--max", str(topic_size(settings, topic)), *args],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    assert b"Traceback" not in proc.stderr
    return proc.stdout.decode("utf-8")  # strict: a lone surrogate could not get here


def assert_inert(out: str) -> None:
    bad = FORBIDDEN.search(out)
    assert bad is None, f"raw control {bad.group()!r} at {bad.start()}: {out[max(0, bad.start() - 80):bad.start() + 40]!r}"


@pytest.mark.parametrize("view", ["canonical", "chat"])
def test_the_readable_views_show_escapes_instead_of_obeying_them(hostile, view):
    out = tail(hostile, "--view", view, topic=CANONICAL_TOPIC if view == "canonical" else CHAT_TOPIC)
    assert_inert(out)
    # the agent's escapes are shown, not dropped: its answer, its command, its output
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in out
    assert "\\x1b]0;pwned\\x07" in out and "\\x1b[2J" in out and "\\x9b2J\\x9d0;c1-title\\x9c" in out
    if view == "chat":  # the canonical view shortens deltas; the chat shows them whole
        assert "\\x07\\x08\\r\\x00\\x7f bye" in out
    # the session id, with which no record can forge a line of its own
    assert "evil\\x1b]0;pwned\\x07\\x9b2J\\n" in out
    # the forged records: printed escaped, a lone surrogate as \ud800, non-objects as such
    assert "\\ud800" in out
    assert out.count("(not a canonflow record)") == 4  # not JSON, an array, not UTF-8, tombstone


def test_the_readable_view_of_one_session_follows_only_it(hostile):
    out = tail(hostile, "--session", SESSION, "--idle-timeout", "5", topic=CANONICAL_TOPIC)
    assert_inert(out)
    assert "hello \\x1b]52;c;" in out and "forged" not in out


@pytest.mark.parametrize("args, topic", [(["--json"], CANONICAL_TOPIC),
                                         (["--json", "--view", "chat"], CHAT_TOPIC),
                                         (["--deadletters"], DEADLETTER_TOPIC)])
def test_the_json_views_escape_controls_as_json_does(hostile, args, topic):
    out = tail(hostile, *args, topic=topic)
    assert_inert(out)
    lines = out.splitlines()
    assert len(lines) == topic_size(hostile, topic)
    parsed = 0
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            continue  # a forged line that was no JSON in the first place
        parsed += 1
        assert line.isascii() or not FORBIDDEN.search(line)
        if isinstance(value, dict) and value.get("type") == "runtime.warning" \
                and value.get("sessionId", "").startswith("forged"):
            assert value["payload"]["message"] == "\ud800 " + OSC52  # same JSON, escaped
    assert parsed >= len(lines) - 2  # all but the forged non-JSON and non-UTF-8 lines
    if topic == DEADLETTER_TOPIC:
        assert "\\u001b]52" in out  # the forged dead letter's escape, as JSON writes it
    else:
        assert "\\u001b]52;c;ZWNobyBwd25lZA==\\u0007" in out and "\\u009b2J" in out


# ---- the renderings, on any JSON value ----------------------------------------------


def _values() -> list[Any]:
    leaves: list[Any] = [None, True, 7, 2.5, "", HOSTILE, "\ud800", SESSION, "a\tb\nc"]
    return leaves + [[x] for x in leaves] + [{"k": x} for x in leaves]


@pytest.mark.parametrize("field", ["type", "payload", "sessionId", "seq", "provider",
                                   "synthetic"])
@pytest.mark.parametrize("type_", ["content.delta", "item.started", "item.completed",
                                   "turn.completed", "request.opened", "runtime.warning",
                                   "session.started"])
def test_render_takes_any_value_in_any_field_and_prints_one_inert_line(field, type_):
    for value in _values():
        for payload in ({}, {k: value for k in ("delta", "streamKind", "itemType", "status",
                                                "toolName", "input", "output", "state",
                                                "requestType", "decision", "outcome",
                                                "message")}):
            event = {"type": type_, "payload": payload, field: value}
            line = render(event)
            assert "\n" not in line and not FORBIDDEN.search(line)
            assert "\t" not in describe(event)
            line.encode("utf-8")  # no lone surrogate


@pytest.mark.parametrize("type_", ["user", "text", "reasoning", "tool_use", "tool_result",
                                   "approval", "question", "error", "done", "other"])
def test_the_chat_renderer_takes_any_value_in_any_field(type_):
    fields = ["session_id", "provider", "item_id", "content", "name", "input", "is_error",
              "state", "request_type", "tool_name", "detail", "decision", "outcome", "questions",
              "answers", "message", "will_retry", "subtype", "result"]
    out: list[str] = []
    renderer = ChatRenderer(out.append)
    for value in _values():
        for state in ("opened", "asked", "resolved"):
            renderer({"type": type_, **{f: value for f in fields}, "state": state})
    text = "".join(out)
    assert not FORBIDDEN.search(text)
    text.encode("utf-8")


def test_visible_keeps_lines_only_where_asked():
    assert visible("a\nb\tc\rd\x1b") == "a\nb\tc\\rd\\x1b"
    assert visible("a\nb\tc", lines=False) == "a\\nb\\tc"
    assert visible("\x85\x9f\xa0é\u2028") == "\\x85\\x9f\xa0é\u2028"
