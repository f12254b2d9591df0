"""The canonical event: every seed 002 type exists, round-trips, and matches the schema."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from topics.canonical import EVENT_TYPES, PAYLOAD_TYPES, SCHEMA_VERSION, decode_event, encode_event
from topics.schema import schema, schema_json

SEED_002_TYPES = {
    "session.started", "session.configured", "session.state.changed", "session.exited",
    "thread.started", "thread.state.changed", "thread.metadata.updated",
    "thread.token-usage.updated", "thread.realtime.started", "thread.realtime.item-added",
    "thread.realtime.audio.delta", "thread.realtime.error", "thread.realtime.closed",
    "turn.started", "turn.completed", "turn.aborted", "turn.plan.updated", "turn.diff.updated",
    "item.started", "item.updated", "item.completed", "content.delta",
    "request.opened", "request.resolved", "user-input.requested", "user-input.resolved",
    "task.started", "task.progress", "task.completed", "hook.started", "hook.progress",
    "hook.completed", "tool.progress", "tool.summary", "auth.status", "account.updated",
    "account.rate-limits.updated", "mcp.status.updated", "mcp.oauth.completed",
    "model.rerouted", "config.warning", "deprecation.notice", "files.persisted",
    "runtime.warning", "runtime.error",
}
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "topics" / "canonflow.schema.json"


def sample(tp: Any) -> Any:
    """A value of type `tp` with every field filled (optional ones too)."""
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: sample(hints[f.name]) for f in msgspec.structs.fields(tp)})
    if origin is typing.Literal:
        return typing.get_args(tp)[0]
    if origin in (typing.Union, __import__("types").UnionType):
        args = [a for a in typing.get_args(tp) if a not in (type(None), msgspec.UnsetType)]
        return sample(args[0])
    if origin is list:
        return [sample(typing.get_args(tp)[0])]
    if origin is dict:
        return {"k": sample(typing.get_args(tp)[1])}
    return {str: "text", int: 7, float: 1.5, bool: True, bytes: b"\x00raw",
            msgspec.Raw: msgspec.Raw(b'{"native":true}')}.get(tp, {"any": [1, "two"]})


def event_of(tag: str) -> Any:
    cls = EVENT_TYPES[tag]
    return cls(schemaVersion=SCHEMA_VERSION, eventId="e", seq=1, provider="codex",
               sessionId="s", createdAt="2026-01-01T00:00:00.000Z", synthetic=False,
               payload=sample(PAYLOAD_TYPES[tag]))


def test_every_seed_002_event_type_is_declared():
    assert set(EVENT_TYPES) == SEED_002_TYPES


@pytest.mark.parametrize("tag", sorted(SEED_002_TYPES))
def test_event_round_trips_through_json(tag: str):
    ev = event_of(tag)
    wire = encode_event(ev)
    assert json.loads(wire)["type"] == tag
    assert decode_event(wire) == ev


def test_envelope_always_carries_schema_version_and_synthetic():
    wire = json.loads(encode_event(event_of("turn.started")))
    assert wire["schemaVersion"] == SCHEMA_VERSION and wire["synthetic"] is False


def test_unknown_fields_are_ignored_by_consumers():
    wire = json.loads(encode_event(event_of("turn.started")))
    wire["futureField"] = {"x": 1}
    wire["payload"]["futurePayloadField"] = 2
    assert decode_event(json.dumps(wire)) == event_of("turn.started")


def test_committed_schema_file_is_current():
    assert SCHEMA_FILE.read_bytes() == schema_json(), (
        "topics/canonflow.schema.json is stale: run `canonflow schema -o topics/canonflow.schema.json`")


@pytest.mark.parametrize("tag", sorted(SEED_002_TYPES))
def test_events_validate_against_the_json_schema(tag: str):
    jsonschema = pytest.importorskip("jsonschema")
    doc = schema()
    validator = jsonschema.Draft202012Validator(
        {"$ref": "#/$defs/CanonicalEvent", "$defs": doc["$defs"]})
    validator.validate(json.loads(encode_event(event_of(tag))))
