"""Redaction (issue 8, guarantee 6): secrets never leave the worker."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipeline.privacy.redact import BUILTIN_PATTERNS, MASK, RedactionError, Redactor
from pipeline.worker.normalize import Normalizer

SECRETS = {
    "openai": "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "bearer": "Bearer abcdefghijklmnopqrstuvwx",
    "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nxyz\n-----END RSA PRIVATE KEY-----",
}


def _command_output(text: str) -> bytes:
    item = {"id": "c", "type": "command_execution", "command": "env", "status": "completed",
            "aggregated_output": text, "exit_code": 0}
    return json.dumps({"type": "item.completed", "item": item}).encode()


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_builtin_patterns_mask_secrets_and_keep_json_valid(kind: str):
    out = Normalizer("codex-exec", redactor=Redactor(list(BUILTIN_PATTERNS))).process(
        None, b"s", _command_output(f"x={SECRETS[kind]}\nok"), partition=0, offset=0)
    text = b"".join(out.records)
    assert SECRETS[kind].split("\n")[0][-12:].encode() not in text
    assert MASK in text
    for e in out.records:
        json.loads(e)


def test_assignments_of_secret_names_are_masked_but_not_lookalikes():
    r = Redactor(list(BUILTIN_PATTERNS))
    doc = {"apiKeySource": "ANTHROPIC_API_KEY", "env": "DB_PASSWORD=letmein\nHOME=/root",
           "cfg": {"client_secret": "abcd1234", "passwords_count": 3}}
    out = json.loads(r.apply(json.dumps(doc).encode()))
    assert out["apiKeySource"] == "ANTHROPIC_API_KEY"
    assert out["env"] == "DB_PASSWORD=[REDACTED]\nHOME=/root"
    assert out["cfg"] == {"client_secret": "[REDACTED]", "passwords_count": 3}


def test_operator_patterns_and_hook_from_the_environment(tmp_path, monkeypatch):
    (tmp_path / "myhooks.py").write_text(
        "def drop_inputs(event):\n"
        "    event['payload'].pop('input', None)\n"
        "    return event\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    r = Redactor.from_env({"CANONFLOW_REDACT": "off", "CANONFLOW_REDACT_PATTERNS": r"internal-\d+",
                           "CANONFLOW_REDACT_HOOK": "myhooks:drop_inputs"})
    out = Normalizer("codex-exec", redactor=r).process(
        None, b"s", _command_output("host internal-42 up"), partition=0, offset=0)
    done = json.loads(out.records[-1])
    assert "input" not in done["payload"] and done["payload"]["output"] == "host [REDACTED] up"


@pytest.mark.parametrize("env", [{"CANONFLOW_REDACT": "maybe"},
                                 {"CANONFLOW_REDACT_PATTERNS": "(unclosed"},
                                 {"CANONFLOW_REDACT_HOOK": "no.such.module:fn"},
                                 {"CANONFLOW_REDACT_HOOK": "json"}])
def test_bad_redaction_settings_are_clear_errors(env):
    with pytest.raises(RedactionError):
        Redactor.from_env(env)


def test_replay_redacts_too_and_can_be_told_not_to():
    line = _command_output(f"token {SECRETS['github']}")
    on = subprocess.run([sys.executable, "-m", "pipeline.cli", "replay", "-p", "codex-exec"],
                        input=line, capture_output=True, check=True).stdout
    off = subprocess.run([sys.executable, "-m", "pipeline.cli", "replay", "-p", "codex-exec"],
                         input=line, capture_output=True, check=True,
                         env={"CANONFLOW_REDACT": "off", "PATH": "/usr/bin:/bin"}).stdout
    assert SECRETS["github"].encode() not in on and SECRETS["github"].encode() in off
