"""The runtimes read in their own formats (pi, Copilot CLI, droid, Kilo, Qwen Code) go
through the worker as every other runtime does: one conversation of each is produced to
its raw topic, and the canonical and chat topics hold what replay gives offline."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pipeline.tools.kafka_io import produce, records_from_file
from pipeline.tools.replay import ChatView
from tests.pipeline.conftest import decoded, read_topic, timed
from tests.pipeline.test_integration import _offline
from topics.canonical import decode_event
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, RAW_TOPICS
from topics.chat import encode_chat

MORE = Path(__file__).resolve().parents[1] / "fixtures" / "more-runtimes"
CONVERSATIONS = {
    "pi": "pi-rpc__tool_shell",
    "copilot": "copilot-json__tool_shell",
    "droid": "droid-stream-json__tool_shell",
    "kilo": "kilo-run-json__tool_shell",
    "qwen": "qwen-stream-json__tool_shell",
}


@pytest.fixture
def produced(settings, worker, tmp_path):
    """Every conversation produced, each as a session of its own, to its raw topic."""
    paths = {}
    for provider, name in CONVERSATIONS.items():
        paths[provider] = timed(MORE / provider / f"{name}.capture.jsonl", tmp_path)
        asyncio.run(produce(settings, provider, f"sess-{provider}",
                            records_from_file(str(paths[provider]), "capture")))
    return paths


def test_each_runtime_has_its_raw_topic():
    assert {p: RAW_TOPICS[p] for p in CONVERSATIONS} == {p: f"agents.raw.{p}"
                                                         for p in CONVERSATIONS}


def test_the_worker_translates_each_as_replay_does_on_both_topics(settings, worker, produced):
    for provider, path in produced.items():
        key = f"sess-{provider}".encode()
        expected = _offline(provider, f"sess-{provider}", path)
        got = decoded(read_topic(settings, CANONICAL_TOPIC, len(expected), key=key,
                                 worker=worker))
        assert got == expected, provider
        view = ChatView()
        chat = [json.loads(encode_chat(r)) for e in expected
                for r in view.feed(decode_event(json.dumps(e)))]
        assert [r["type"] for r in chat].count("tool_use") == 1, provider
        assert decoded(read_topic(settings, CHAT_TOPIC, len(chat), key=key,
                                  worker=worker)) == chat, provider
