"""Issue 25, finding 4: dead letters are kept 30 days, so they are redacted too.

A dead letter kept the record's original bytes, secrets and all. Now its value is
redacted by default (each JSON line by value, anything else as text), with the
original's size and SHA-256, which find and check the record in its raw topic; the
original bytes only with CANONFLOW_DEADLETTER_ORIGINAL=true, which warns at start."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging

import msgspec
from msgspec import UNSET

from pipeline.privacy import redact
from pipeline.privacy.redact import Redactor
from pipeline.tools.kafka_io import RawRecord, produce
from pipeline.worker.normalize import Normalizer
from tests.pipeline.conftest import read_topic
from tests.pipeline.secret_corpus import CORPUS
from topics.catalog import DEADLETTER_TOPIC, raw_topic
from topics.records import decode_deadletter

TOKEN = "ghp_" + "Zq8" * 12
MALFORMED = f'{{"type": "item.completed", "item": {{"aggregated_output": "GITHUB_TOKEN={TOKEN}'.encode()
# valid JSON the adapter cannot take (a thread event without its id), with a password
STRUCTURED = json.dumps({"type": "thread.started", "thread_id": 42,
                         "config": {"password": 123456, "user": "app"}}).encode()


def _letter(value: bytes, env: dict[str, str] | None = None, **kw) -> object:
    n = Normalizer("codex-exec", redactor=Redactor.from_env(env or {}), **kw)
    [data] = n.process(None, b"s", value, partition=2, offset=9).deadletters
    return decode_deadletter(data)


def test_a_dead_letter_holds_the_record_redacted_with_the_originals_size_and_hash():
    dl = _letter(MALFORMED)
    assert dl.errorClass == "MalformedRecord"
    assert TOKEN.encode() not in dl.value and b"GITHUB_TOKEN=[REDACTED]" in dl.value
    assert (dl.valueBytes, dl.valueSha256) == (len(MALFORMED), hashlib.sha256(MALFORMED).hexdigest())
    assert "redacted" in dl.reason


def test_a_json_line_is_redacted_by_value_and_stays_json():
    dl = _letter(STRUCTURED)
    doc = json.loads(dl.value)
    assert doc["config"] == {"password": "[REDACTED]", "user": "app"}
    assert dl.valueSha256 == hashlib.sha256(STRUCTURED).hexdigest()


def test_every_secret_of_the_corpus_is_redacted_from_dead_letters():
    for case in CORPUS:
        # not UTF-8, not JSON: redacted as text; one line (each line of a record is a
        # dead letter of its own), line ends escaped as in a JSON string
        text = case.text.replace("\r", "\\r").replace("\n", "\\n")
        value = b"\xff" + text.encode()
        dl = _letter(value)
        for secret in case.secrets:
            assert secret.encode() not in dl.value, (case.name, secret)
        assert dl.valueBytes == len(value), case.name


def test_a_dead_letter_without_secrets_is_as_it_was():
    dl = _letter(b"\x00\x01 definitely not json")
    assert dl.value == b"\x00\x01 definitely not json" and dl.valueBytes is UNSET


def test_a_redacted_dead_letter_cut_to_fit_keeps_the_originals_size_and_hash():
    value = MALFORMED + b" " + b"x" * 5000
    dl = _letter(value, max_message_bytes=2000, max_record_bytes=100)
    assert dl.errorClass == "OversizedRecord"
    assert TOKEN.encode() not in dl.value and len(dl.value) > 500
    assert (dl.valueBytes, dl.valueSha256) == (len(value), hashlib.sha256(value).hexdigest())


def test_the_original_bytes_only_on_request_and_with_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(redact, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="pipeline.privacy.redact"):
        dl = _letter(MALFORMED, {"CANONFLOW_DEADLETTER_ORIGINAL": "true"})
    assert dl.value == MALFORMED and dl.valueBytes is UNSET
    assert "CANONFLOW_DEADLETTER_ORIGINAL is on" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pipeline.privacy.redact"):
        _letter(MALFORMED, {"CANONFLOW_DEADLETTER_ORIGINAL": "false"})
    assert "CANONFLOW_DEADLETTER_ORIGINAL" not in caplog.text


def test_the_worker_redacts_dead_letters_and_the_hash_finds_the_raw_record(settings, worker):
    asyncio.run(produce(settings, "codex-exec", "sess-dead",
                        [RawRecord(MALFORMED, "agent", None), RawRecord(STRUCTURED, "agent", None)]))
    letters = [decode_deadletter(r.value) for r in
               read_topic(settings, DEADLETTER_TOPIC, 2, key=b"sess-dead", worker=worker)]
    assert len(letters) == 2
    for dl in letters:
        assert TOKEN.encode() not in dl.value and b"123456" not in dl.value
        assert dl.valueBytes is not UNSET
    # the operator's way back to the original: topic, partition, offset, checked by hash
    raws = read_topic(settings, raw_topic("codex-exec"), 2, key=b"sess-dead")
    by_offset = {(r.partition, r.offset): r.value for r in raws}
    for dl in letters:
        original = by_offset[(dl.partition, dl.offset)]
        assert dl.topic == raw_topic("codex-exec")
        assert hashlib.sha256(original).hexdigest() == dl.valueSha256
        assert len(original) == dl.valueBytes


def test_the_dead_letter_setting_is_a_worker_setting():
    from pipeline.settings import Settings, from_env, to_env

    s = from_env({"CANONFLOW_DEADLETTER_ORIGINAL": "yes", "CANONFLOW_REDACT_BUDGET": "16"})
    assert (s.deadletter_original, s.redact_budget) == (True, 16)
    r = Redactor.from_env(to_env(s))
    assert r.deadletter_original and r.budget == 16
    assert Settings().redact_budget == redact.DEFAULT_BUDGET
    assert msgspec.structs.fields(Settings)  # the new settings are plain fields
