"""Record sizes on a cluster at Kafka's default max.message.bytes (1,048,588).

A real worker translates an 8 MiB command output streamed in deltas, a single delta
of about 1 MiB (as much as one raw record holds: its event is split in several) and a
2 MiB tool input
streamed in parts: every event fits agents.canonical, nothing is dead-lettered or
refused and sent again, the deltas join to the original bytes, the completions carry
head, tail, length and SHA-256, and the worker's events are replay's (`python -m
pipeline.cli replay`, a child process, on the same capture)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.tools.kafka_io import follow, produce, records_from_file
from pipeline.worker.process import WorkerProcess
from tests.pipeline.conftest import decoded, read_topic
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC, MAX_EVENT_BYTES, topic

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ROOT / "tests" / "fixtures" / "versions"
CODEX = VERSIONS / "codex" / "codex-app-server__0.130.0__shell_slow.capture.jsonl"
CLAUDE = VERSIONS / "claude" / "claude-code-stream-json-partial__2.0.77__file_write.capture.jsonl"
MiB = 1024 * 1024
T0 = 1_764_000_000_000


def capture(lines: list[dict[str, Any]], path: Path) -> Path:
    """`lines` (capture lines) with capture times, written to `path`: the worker (its
    `t` header) and replay see the same times."""
    path.write_text("".join(json.dumps({**x, "t": T0 + 10 * i}) + "\n"
                            for i, x in enumerate(lines)))
    return path


def fixture(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def big_output() -> str:
    """8 MiB of numbered lines: a head or tail out of place shows."""
    lines = [f"out-{i:08d} " + "x" * 50 + "\n" for i in range(8 * MiB // 64)]
    return "".join(lines)


def codex_session() -> tuple[list[dict[str, Any]], str, str]:
    """The Codex app-server fixture's session with its command's output made 8 MiB in
    64 KiB deltas (aggregatedOutput null on completion, as Codex sends it where the
    deltas are the output), then a second command whose output is one delta as large
    as one raw record holds; (capture lines, the first output, the second)."""
    lines = fixture(CODEX)
    delta = next(x for x in lines
                 if x["msg"].get("method") == "item/commandExecution/outputDelta")
    # the native message as large as a raw record may be (1 MiB, less the record's
    # headers): its event, with the canonical envelope, would not fit agents.canonical
    empty = json.loads(json.dumps(delta["msg"]))
    empty["params"].update(itemId="call_big_2", delta="")
    out1 = big_output()
    out2 = "".join(chr(0x61 + i % 26) for i in range(1_047_000 - len(json.dumps(empty))))
    started = next(x for x in lines if x["msg"].get("method") == "item/started"
                   and x["msg"]["params"]["item"]["type"] == "commandExecution")
    done = next(x for x in lines if x["msg"].get("method") == "item/completed"
                and x["msg"]["params"]["item"]["type"] == "commandExecution")
    end = next(i for i, x in enumerate(lines) if x["msg"].get("method") == "turn/completed")
    head = [x for x in lines[:end] if x["msg"].get("method", "").split("/")[0] != "item"
            or x["msg"]["params"].get("item", {}).get("type") == "userMessage"]

    def command(n: int, output: str, piece: int) -> list[dict[str, Any]]:
        item_id = f"call_big_{n}"
        msgs = [_with_item(started, item_id)]
        for i in range(0, len(output), piece):
            d = json.loads(json.dumps(delta))
            d["msg"]["params"].update(itemId=item_id, delta=output[i:i + piece])
            msgs.append(d)
        c = _with_item(done, item_id)
        c["msg"]["params"]["item"]["aggregatedOutput"] = None
        return [*msgs, c]

    return ([*head, *command(1, out1, 64 * 1024), *command(2, out2, len(out2)),
             *lines[end:]], out1, out2)


def _with_item(line: dict[str, Any], item_id: str) -> dict[str, Any]:
    out = json.loads(json.dumps(line))
    out["msg"]["params"]["item"]["id"] = item_id
    return out


def claude_session() -> tuple[list[dict[str, Any]], str]:
    """The Claude stream-json fixture's Write call with a 2 MiB `content`, its
    input_json_delta parts 512 KiB each; the `assistant` line that repeats the input
    whole is left out (a 2 MiB line is more than the raw topic takes: the adapter
    finishes the tool from its parts at content_block_stop). (lines, content)"""
    lines = fixture(CLAUDE)
    content = "".join(f"row {i:07d}\n" for i in range(2 * MiB // 12))
    partial = json.dumps({"file_path": "/sandbox/workspace/big.txt", "content": content})
    first = next(i for i, x in enumerate(lines) if _delta_type(x) == "input_json_delta")
    template = lines[first]
    parts = []
    for i in range(0, len(partial), 512 * 1024):
        p = json.loads(json.dumps(template))
        p["msg"]["event"]["delta"]["partial_json"] = partial[i:i + 512 * 1024]
        parts.append(p)
    rest = [x for x in lines[first:] if _delta_type(x) != "input_json_delta"
            and not _tool_use_line(x)]
    return [*lines[:first], *parts, *rest], content


def _delta_type(line: dict[str, Any]) -> str | None:
    event = line["msg"].get("event") or {}
    return (event.get("delta") or {}).get("type")


def _tool_use_line(line: dict[str, Any]) -> bool:
    msg = line["msg"]
    return msg.get("type") == "assistant" and any(
        c.get("type") == "tool_use" for c in msg["message"]["content"])


def replay(provider: str, session: str, path: Path) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "replay", "-p", provider, "--format", "capture",
         "-s", session, str(path)], capture_output=True, env=env, check=True, cwd=ROOT)
    assert done.stderr == b"", done.stderr[:2000]  # no dead letter
    return [json.loads(x) for x in done.stdout.splitlines()]


def all_records(settings: Any, name: str) -> list[Any]:
    """The records of `name` on the cluster, read until none comes for 5 s (the worker
    publishes a record's dead letters and chat records with its events, which were all
    read before)."""
    got: list[Any] = []
    asyncio.run(follow(settings, [name], lambda rec: bool(got.append(rec)), idle_timeout=5))
    return got


@pytest.mark.broker
def test_large_outputs_and_inputs_fit_a_default_cluster_with_nothing_refused(
        settings, tmp_path: Path) -> None:
    assert topic(CANONICAL_TOPIC).max_message_bytes == 1_048_588
    assert topic(CHAT_TOPIC).max_message_bytes == 1_048_588
    codex_lines, out1, out2 = codex_session()
    claude_lines, content = claude_session()
    codex_path = capture(codex_lines, tmp_path / "codex.capture.jsonl")
    claude_path = capture(claude_lines, tmp_path / "claude.capture.jsonl")
    expected_codex = replay("codex", "sess-codex", codex_path)
    expected_claude = replay("claude", "sess-claude", claude_path)

    worker = WorkerProcess(settings, log_path=str(tmp_path / "worker.log")).start()
    try:
        asyncio.run(produce(settings, "codex", "sess-codex",
                            records_from_file(str(codex_path), "capture")))
        asyncio.run(produce(settings, "claude", "sess-claude",
                            records_from_file(str(claude_path), "capture")))
        got_codex = read_topic(settings, CANONICAL_TOPIC, len(expected_codex),
                               key=b"sess-codex", worker=worker, timeout=300)
        got_claude = read_topic(settings, CANONICAL_TOPIC, len(expected_claude),
                                key=b"sess-claude", worker=worker, timeout=300)
        chat = all_records(settings, CHAT_TOPIC)
        letters = all_records(settings, DEADLETTER_TOPIC)
    finally:
        worker.stop()
    log = Path(worker.log_path or "").read_text(errors="replace")
    assert letters == []
    assert "not delivered" not in log and "refused a record" not in log, log[-3000:]
    assert max(len(r.value) for r in got_codex + got_claude + chat) <= MAX_EVENT_BYTES
    assert not [r for r in chat if json.loads(r.value).get("type") == "error"]
    codex, claude = decoded(got_codex), decoded(got_claude)
    assert codex == expected_codex and claude == expected_claude

    for n, output in ((1, out1), (2, out2)):
        item = next(e["itemId"] for e in codex if e["type"] == "item.started"
                    and e.get("providerRefs", {}).get("providerItemId") == f"call_big_{n}")
        deltas = [e["payload"]["delta"] for e in codex
                  if e["type"] == "content.delta" and e["itemId"] == item]
        assert "".join(deltas) == output
        if n == 2:
            assert len(deltas) > 1  # split: the one delta's event would not fit
        [done] = [e["payload"] for e in codex
                  if e["type"] == "item.completed" and e["itemId"] == item]
        assert done["outputTruncated"] is True and done["outputLength"] == len(output)
        assert done["outputSha256"] == hashlib.sha256(output.encode()).hexdigest()
        head, _, rest = done["output"].partition("\n[canonflow: ")
        cut, _, tail = rest.partition(" characters left out]\n")
        assert output.startswith(head) and output.endswith(tail)
        assert len(head) + int(cut) + len(tail) == len(output)
        assert 16 * 1024 <= len(head.encode()) <= 64 * 1024 and len(tail.encode()) <= 64 * 1024

    tool = [e["payload"] for e in claude if e["type"].startswith("item.")
            and e["payload"].get("toolName") == "Write" and "input" in e["payload"]
            and "content" in e["payload"]["input"]]
    assert tool, [e["type"] for e in claude]
    whole = json.dumps({"file_path": "/sandbox/workspace/big.txt", "content": content},
                       separators=(",", ":"))
    for p in tool:
        assert p["inputTruncated"] is True and p["inputLength"] == len(whole)
        assert p["inputSha256"] == hashlib.sha256(whole.encode()).hexdigest()
        assert p["input"]["file_path"] == "/sandbox/workspace/big.txt"
        head, _, rest = p["input"]["content"].partition("\n[canonflow: ")
        cut, _, tail = rest.partition(" characters left out]\n")
        assert content.startswith(head) and content.endswith(tail)
        assert len(head) + int(cut) + len(tail) == len(content)
        assert len(head) > 256 * 1024  # cut only as far as the limit needs


def test_with_include_raw_an_output_sent_whole_stays_whole_and_raw_gives_way(tmp_path: Path):
    """`canonflow replay --include-raw` (a child process, as the worker with
    CANONFLOW_INCLUDE_RAW): a command output of 700 KB that Codex sent whole in
    aggregatedOutput passes whole, past the 64 KiB cap; the event with the native
    message again in `raw` would not fit, so `raw.payload` is left out, with its size
    and SHA-256."""
    lines = fixture(CODEX)
    output = "".join(f"row {i:07d}\n" for i in range(700_000 // 12))
    for x in lines:
        item = x["msg"].get("params", {}).get("item", {})
        if x["msg"].get("method") == "item/completed" and item.get("type") == "commandExecution":
            item["aggregatedOutput"] = output
            native = json.dumps(x["msg"]).encode()
    path = capture(lines, tmp_path / "raw.capture.jsonl")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "replay", "-p", "codex", "--format", "capture",
         "--include-raw", str(path)], capture_output=True, env=env, check=True, cwd=ROOT)
    assert done.stderr == b""
    assert max(len(x) for x in done.stdout.splitlines()) <= MAX_EVENT_BYTES
    events = [json.loads(x) for x in done.stdout.splitlines()]
    [completed] = [e for e in events if e["type"] == "item.completed"
                   and e["payload"]["itemType"] == "command_execution"]
    assert completed["payload"]["output"] == output
    assert "outputTruncated" not in completed["payload"]
    raw = completed["raw"]
    assert raw["payload"] is None and raw["payloadTruncated"] is True
    assert raw["payloadBytes"] == len(native)
    assert raw["payloadSha256"] == hashlib.sha256(native).hexdigest()
    # the events that fit keep their raw message
    assert all(e["raw"]["payload"] is not None for e in events if e is not completed)
