"""CloudEvents headers (binary content mode of the Kafka binding) on what the normalizer
publishes, read by the CloudEvents SDK (README "CloudEvents"). The same on records read
back from a broker: tests/pipeline/test_consumer.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cloudevents.core.bindings.kafka import KafkaMessage, from_binary
from cloudevents.core.formats.json import JSONFormat

from pipeline.tools.replay import iter_lines, parse_line
from pipeline.worker.checkpoint import outputs
from pipeline.worker.normalize import Normalizer
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC
from topics.cloudevents import source

CAPTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "captured" / "codex"
           / "codex-app-server__tool_shell.capture.jsonl")


def _published(n: Normalizer, key: bytes = b"sess/1") -> list[tuple[Any, ...]]:
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
    items = _published(Normalizer("codex", app_id="prod eu"))
    events = [i for i in items if i[0] == CANONICAL_TOPIC]
    chat = [i for i in items if i[0] == CHAT_TOPIC]
    assert len(events) > 10 and len(chat) > 3
    times = {}
    for _, value, key, _, _, headers in events:
        ce, body = _cloudevent(value, key, headers), json.loads(value)
        times[body["eventId"]] = ce.get_time()
        assert (ce.get_id(), ce.get_type(), ce.get_subject(), ce.get_source()) == (
            body["eventId"], "dev.canonflow." + body["type"], "sess/1", "/canonflow/prod%20eu/codex")
        assert ce.get_time().isoformat(timespec="milliseconds").replace("+00:00", "Z") == \
            body["createdAt"]
        assert ce.get_dataschema() == \
            "https://canonflow.dev/schema/v1/canonflow.schema.json#/$defs/CanonicalEvent"
        assert ce.get_datacontenttype() == "application/json" and ce.get_data() == body
    for _, value, key, _, _, headers in chat:
        ce, body = _cloudevent(value, key, headers), json.loads(value)
        assert (ce.get_id(), ce.get_type(), ce.get_subject()) == (
            body["event_id"], "dev.canonflow.chat." + body["type"], "sess/1")
        assert ce.get_time() == times[body["source_event_id"]]  # its canonical event's


def test_dead_letters_carry_no_cloudevents_headers():
    n = Normalizer("codex")
    out = n.process(None, b"s", b"{not json", partition=0, offset=0)
    (letter,) = list(outputs(out, b"s", 0, None))
    assert letter[0] == DEADLETTER_TOPIC and len(letter) == 5


def test_an_event_too_large_is_published_as_the_warning_it_became():
    largest = max(len(i[1]) for i in _published(Normalizer("codex")) if i[0] == CANONICAL_TOPIC)
    items = _published(Normalizer("codex", max_event_bytes=largest - 1))
    warnings = [i for i in items if i[0] == CANONICAL_TOPIC
                and json.loads(i[1])["type"] == "runtime.warning"]
    assert warnings
    for _, value, key, _, _, headers in warnings:
        assert _cloudevent(value, key, headers).get_type() == "dev.canonflow.runtime.warning"


def test_the_source_is_a_uri_reference_whatever_the_app_id():
    assert source("canonflow", "claude") == "/canonflow/canonflow/claude"
    assert source("a/b?c#d", "x") == "/canonflow/a%2Fb%3Fc%23d/x"
