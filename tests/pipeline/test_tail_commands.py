"""`canonflow tail` shows a command as the model wrote it, without the shell wrapper
a runtime puts around it (Codex runs `ls` as `/bin/bash -lc 'ls'`), in the canonical
view and in the chat view; the events keep the command as the runtime sent it.

A captured Codex app-server session (a command that needed an approval) goes through
the embedded broker and a real worker; then the real `canonflow tail` runs in a child
process in each view.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pipeline.tools.kafka_io import RawRecord, produce
from pipeline.tools.replay import iter_lines, parse_line
from pipeline.views.render import ChatRenderer, describe, shown_command
from tests.pipeline.test_tail_escapes import tail, wait_for_type
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC

pytestmark = pytest.mark.broker

CAPTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "captured" / "codex"
           / "codex-app-server__approval_accept.capture.jsonl")
SESSION = "codex-approval"
WRAPPED = "/bin/bash -lc 'touch fixture-approval.txt'"
COMMAND = "touch fixture-approval.txt"


def _records() -> list[RawRecord]:
    with open(CAPTURE, "rb") as fh:
        lines = [parse_line(raw, "capture") for _, raw in iter_lines(fh)]
    return [RawRecord(ln.data, ln.origin, 1_764_000_000_000 + 10 * i)
            for i, ln in enumerate(lines)]


def test_tail_shows_codex_commands_without_their_shell_wrapper(settings, worker):
    assert WRAPPED.encode() in CAPTURE.read_bytes()  # the runtime did wrap it
    asyncio.run(produce(settings, "codex", SESSION, _records()))
    for topic, last in ((CANONICAL_TOPIC, "turn.completed"), (CHAT_TOPIC, "done")):
        wait_for_type(settings, topic, SESSION.encode(), last, worker)

    canonical = tail(settings, topic=CANONICAL_TOPIC)
    started = [ln for ln in canonical.splitlines() if "item.started" in ln and "Bash" in ln]
    assert started and all(COMMAND in ln for ln in started), canonical
    assert "/bin/bash" not in canonical, canonical

    chat = tail(settings, "--view", "chat", topic=CHAT_TOPIC)
    assert f"tool Bash: {COMMAND}\n" in chat, chat
    assert f"Bash {COMMAND}\n" in chat, chat  # the approval asks to run the command
    assert "/bin/bash" not in chat, chat

    # what is stored is what the runtime sent
    assert WRAPPED in tail(settings, "--json", topic=CANONICAL_TOPIC)
    assert WRAPPED in tail(settings, "--json", "--view", "chat", topic=CHAT_TOPIC)


@pytest.mark.parametrize("value, shown", [
    ({"command": WRAPPED, "cwd": "/w"}, COMMAND),
    ({"command": ["/bin/zsh", "-c", "echo 'a b'"]}, "echo 'a b'"),
    ({"command": ["ls", "-la", "my dir"]}, "ls -la 'my dir'"),
    ({"cmd": "bash -c \"make test\""}, "make test"),
    ({"command": "/bin/bash -lc 'unbalanced"}, "/bin/bash -lc 'unbalanced"),
    ({"command": "bash -lc"}, "bash -lc"),
    ({"file_path": "a.py"}, None),
    (WRAPPED, COMMAND),
    (7, None),
])
def test_shown_command_unwraps_a_shell_and_keeps_anything_else(value, shown):
    assert shown_command(value) == shown


def test_the_renderings_keep_a_command_that_is_not_wrapped():
    event = {"type": "item.started", "payload": {"itemType": "command_execution",
                                                 "toolName": "Bash", "input": {"command": "ls"}}}
    assert describe(event).endswith("Bash ls")
    out: list[str] = []
    ChatRenderer(out.append)({"type": "tool_use", "provider": "claude", "session_id": "s",
                              "name": "Read", "input": {"file_path": "a.py"}})
    assert out == ['[claude s] tool Read: {"file_path": "a.py"}\n']
