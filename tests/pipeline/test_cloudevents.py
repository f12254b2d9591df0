"""CloudEvents headers (binary content mode of the Kafka binding) on what the normalizer
publishes, read by the CloudEvents SDK (README "CloudEvents"). The same on records read
back from a broker: tests/pipeline/test_consumer.py. An event's identity (ce_source,
ce_id) is the same when a worker under another app id translates its input again."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from cloudevents.core.bindings.kafka import KafkaMessage, from_binary
from cloudevents.core.formats.json import JSONFormat

from pipeline.ops.records import ProducerRecord
from pipeline.tools.kafka_io import follow
from pipeline.tools.replay import iter_lines, parse_line
from pipeline.worker.checkpoint import outputs
from pipeline.worker.normalize import Normalizer
from pipeline.worker.process import WorkerProcess
from tests.pipeline.faults import (
    expected_canonical,
    expected_chat,
    interleave,
    produce_records,
    total,
    workload,
)
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC
from topics.cloudevents import source

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "topics" / "canonflow.schema.json"

CAPTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "captured" / "codex"
           / "codex-app-server__tool_shell.capture.jsonl")


def _published(n: Normalizer, key: bytes = b"sess/1") -> list[ProducerRecord]:
    state, items = None, []
    with open(CAPTURE, "rb") as fh:
        for offset, (_, raw) in enumerate(iter_lines(fh)):
            line = parse_line(raw, "capture")
            out = n.process(state, key, line.data, partition=0, offset=offset,
                            headers=[("origin", line.origin.encode())],
                            timestamp_ms=1_764_000_000_000 + offset)
            state = out.state or state
            items += outputs(out, key, 0, None)
    return items


def _cloudevent(value: bytes, key: bytes, headers: list[tuple[str, bytes]]) -> Any:
    return from_binary(KafkaMessage(headers=dict(headers), key=key, value=value), JSONFormat())


def test_every_event_and_chat_record_is_a_cloudevent_the_sdk_reads():
    items = _published(Normalizer("codex"))
    events = [i for i in items if i.topic == CANONICAL_TOPIC]
    chat = [i for i in items if i.topic == CHAT_TOPIC]
    assert len(events) > 10 and len(chat) > 3
    times = {}
    for r in events:
        ce, body = _cloudevent(r.value, r.key, r.headers), json.loads(r.value)
        times[body["eventId"]] = ce.get_time()
        assert (ce.get_id(), ce.get_type(), ce.get_subject(), ce.get_source()) == (
            body["eventId"], "dev.canonflow." + body["type"], "sess/1", "/canonflow/codex/sess%2F1")
        assert ce.get_time().isoformat(timespec="milliseconds").replace("+00:00", "Z") == \
            body["createdAt"]
        assert ce.get_dataschema() == \
            "https://canonflow.dev/schema/v1/canonflow.schema.json#/$defs/CanonicalEvent"
        assert ce.get_datacontenttype() == "application/json" and ce.get_data() == body
    for r in chat:
        ce, body = _cloudevent(r.value, r.key, r.headers), json.loads(r.value)
        assert (ce.get_id(), ce.get_type(), ce.get_subject(), ce.get_source()) == (
            body["event_id"], "dev.canonflow.chat." + body["type"], "sess/1",
            "/canonflow/codex/sess%2F1")
        assert ce.get_time() == times[body["source_event_id"]]  # its canonical event's


def test_dead_letters_carry_no_cloudevents_headers():
    n = Normalizer("codex")
    out = n.process(None, b"s", b"{not json", partition=0, offset=0)
    (letter,) = list(outputs(out, b"s", 0, None))
    assert letter.topic == DEADLETTER_TOPIC and letter.headers is None


def test_an_event_too_large_is_published_as_the_warning_it_became():
    largest = max(len(i.value) for i in _published(Normalizer("codex")) if i.topic == CANONICAL_TOPIC)
    items = _published(Normalizer("codex", max_event_bytes=largest - 1))
    warnings = [i for i in items if i.topic == CANONICAL_TOPIC
                and json.loads(i.value)["type"] == "runtime.warning"]
    assert warnings
    for r in warnings:
        assert _cloudevent(r.value, r.key, r.headers).get_type() == "dev.canonflow.runtime.warning"


def test_the_source_is_a_uri_reference_whatever_the_session_id():
    assert source("claude", "0b5c-41") == "/canonflow/claude/0b5c-41"
    assert source("x", "a/b?c#d é") == "/canonflow/x/a%2Fb%3Fc%23d%20%C3%A9"


def test_a_records_source_is_its_own_sessions_even_when_sessions_alternate():
    n = Normalizer("codex")
    sources = [dict(i.headers)["ce_source"] for key in (b"a", b"b", b"a")
               for i in _published(n, key)[:1]]
    assert sources == [b"/canonflow/codex/a", b"/canonflow/codex/b", b"/canonflow/codex/a"]


def test_the_dataschema_is_the_committed_schemas_id_and_a_definition_in_it():
    """ce_dataschema resolves: the part before `#` is the committed schema's `$id`, and
    the fragment points at the record's definition in that document."""
    doc = json.loads(SCHEMA_FILE.read_text())
    items = _published(Normalizer("codex"))
    schemas = {(t, dict(i.headers)["ce_dataschema"].decode()) for i in items
               if (t := i.topic) in (CANONICAL_TOPIC, CHAT_TOPIC)}
    assert {t for t, _ in schemas} == {CANONICAL_TOPIC, CHAT_TOPIC} and len(schemas) == 2
    for topic, url in schemas:
        base, fragment = url.split("#")
        assert base == doc["$id"]
        assert fragment == "/$defs/" + ("ChatRecord" if topic == CHAT_TOPIC else "CanonicalEvent")
        assert fragment.split("/")[-1] in doc["$defs"]


def _identities(settings: Any, topics: dict[str, int], copies: int,
                timeout: float = 120.0) -> dict[tuple[str, str, int], list[tuple[bytes, bytes]]]:
    """(ce_source, ce_id) of every record of `topics` (topic -> distinct records
    expected), per (topic, session, seq), read from the start until each of the
    expected records was seen `copies` times."""
    got: dict[tuple[str, str, int], list[tuple[bytes, bytes]]] = defaultdict(list)
    full: Counter[str] = Counter()

    def take(rec: Any) -> bool:
        body, head = json.loads(rec.value), dict(rec.headers)
        chat = rec.topic == CHAT_TOPIC
        key = (rec.topic, body["session_id" if chat else "sessionId"], body["seq"])
        got[key].append((head["ce_source"], head["ce_id"]))
        if len(got[key]) == copies:
            full[rec.topic] += 1
        return all(full[t] >= n for t, n in topics.items())

    asyncio.run(follow(settings, list(topics), take, deadline=time.monotonic() + timeout))
    return got


def test_translating_again_under_another_app_id_gives_every_event_its_identity_again(
        settings, tmp_path):
    """The README's upgrade path: a worker under a new CANONFLOW_APP_ID (a new consumer
    group, new tables) translates the raw topics again. Its events and chat records are
    copies of the first worker's: the same ce_source and ce_id, so CloudEvents tooling
    takes them for duplicates."""
    work = workload(150, prefix="ident")
    canonical = expected_canonical(work)
    want = {CANONICAL_TOPIC: total(canonical), CHAT_TOPIC: total(expected_chat(canonical))}
    asyncio.run(produce_records(settings, interleave(work)))
    for copies, app_id in enumerate(("canonflow-blue", "canonflow-green"), start=1):
        run = settings.replace(app_id=app_id, data_dir=str(tmp_path / app_id))
        w = WorkerProcess(run, log_path=str(tmp_path / f"{app_id}.log")).start()
        try:
            seen = _identities(settings, want, copies)
        finally:
            w.stop()
        full = [k for k, ids in seen.items() if len(ids) >= copies]
        assert len(full) == sum(want.values()), f"{app_id}: see {w.log_path}"
    different = {k: set(ids) for k, ids in seen.items() if len(set(ids)) != 1}
    assert not different, f"{len(different)} records changed identity, e.g. " \
        f"{next(iter(different.items()))}"
    sources = {ids[0][0] for ids in seen.values()}
    assert sources == {source(w.provider, w.session_id).encode() for w in work}
