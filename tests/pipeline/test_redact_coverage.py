"""Issue 25, finding 2: secrets of the common formats, printed by a tool or written in
an agent's text, are never published (through the worker's own Normalizer, default
settings), and what is published still decodes."""

from __future__ import annotations

import json

import msgspec
import pytest

from pipeline.privacy.redact import RULES, Redactor
from pipeline.worker.normalize import Normalizer
from tests.pipeline.secret_corpus import CORPUS, Case
from topics.canonical import decode_event


def _published(item: dict) -> tuple[list[bytes], list[bytes]]:
    out = Normalizer("codex-exec", redactor=Redactor.from_env({})).process(
        None, b"s", json.dumps({"type": "item.completed", "item": item}).encode(),
        partition=0, offset=0)
    assert out.deadletters == []
    return out.records, out.chat


def _leaks(case: Case, records: list[bytes]) -> list[str]:
    """The secrets of `case` found in `records`, as they are or JSON-escaped."""
    found = []
    for secret in case.secrets:
        forms = {secret.encode(), msgspec.json.encode(secret)[1:-1]}
        if any(f in r for f in forms for r in records):
            found.append(secret)
    return found


def test_the_corpus_has_the_formats_of_the_finding():
    assert len(CORPUS) >= 26 and len({c.name for c in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_a_secret_in_a_tool_output_is_not_published(case: Case):
    records, chat = _published({"id": "c", "type": "command_execution", "command": "cat cfg",
                                "status": "completed", "aggregated_output": case.text,
                                "exit_code": 0})
    assert _leaks(case, records + chat) == []
    for r in records:
        decode_event(r)
    assert b"[REDACTED]" in records[-1]


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_a_secret_in_an_agents_text_is_not_published(case: Case):
    records, chat = _published({"id": "m", "type": "agent_message",
                                "text": f"I found this:\n{case.text}\nDone."})
    assert _leaks(case, records + chat) == []
    for r in records:
        decode_event(r)


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_a_secret_in_a_command_line_is_not_published(case: Case):
    command = "echo " + json.dumps(case.text)
    records, chat = _published({"id": "c", "type": "command_execution", "command": command,
                                "status": "completed", "aggregated_output": "", "exit_code": 0})
    assert _leaks(case, records + chat) == []


LOOKALIKES = [
    "mkdir -p /tmp/build && cp -p a b",
    "grep -rn 'BEGIN RSA PRIVATE KEY' .\nsecrets/k1.pem:1:-----BEGIN RSA PRIVATE KEY-----\n",
    "def login(token: str, password: str) -> None:",
    '{"inputTokens": 1200, "max_tokens": 4096, "apiKeySource": "ANTHROPIC_API_KEY"}',
    "see https://docs.example.com:8443/path?x=1 and http://localhost:3000/",
    "PWD=/home/agent\nOLDPWD=/home",
    "the task-runner-abcdefghijklmnopqrstuv finished",
    "git push -u origin main:main",
]


@pytest.mark.parametrize("text", LOOKALIKES)
def test_text_that_only_looks_like_a_secret_is_kept(text: str):
    r = Redactor.from_env({})
    assert r.redact_text(text.encode()) == text.encode()


def test_every_rule_names_its_source():
    for rule in RULES:
        assert rule.source and rule.name
