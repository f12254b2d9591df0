"""JSON Schema of every record canonflow publishes, generated from the msgspec types."""

from __future__ import annotations

import json

import msgspec

from topics.canonical import SCHEMA_VERSION, CanonicalEvent
from topics.chat import ChatRecord
from topics.metrics import FleetMetrics
from topics.records import DeadLetter
from topics.runtimes import RUNTIMES
from topics.sessions import SessionSummary

#: The schema document's `$id`, its schema version in the path: a breaking change gets a
#: new document. Each record's CloudEvents `ce_dataschema` is this and a fragment.
SCHEMA_ID = f"https://canonflow.dev/schema/v{SCHEMA_VERSION}/canonflow.schema.json"


def schema() -> dict[str, object]:
    """One JSON Schema document: `$defs` for every type, and the published records
    (`CanonicalEvent`, `ChatRecord`, `DeadLetter`, `FleetMetrics`, `SessionSummary`) named under
    `x-canonflow-records`, and the registered provider ids under `x-canonflow-providers`."""
    records = {"CanonicalEvent": CanonicalEvent, "ChatRecord": ChatRecord,
               "DeadLetter": DeadLetter, "FleetMetrics": FleetMetrics,
               "SessionSummary": SessionSummary}
    schemas, components = msgspec.json.schema_components(
        list(records.values()), ref_template="#/$defs/{name}")
    for component in components.values():
        _describe_tag(component)
    doc: dict[str, object] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "canonflow records",
        "anyOf": [{"$ref": f"#/$defs/{name}"} for name in records],
        # a Struct's own schema is only a $ref to its component: keep the component
        "$defs": {**components, **{name: s for name, s in zip(records, schemas, strict=True)
                                   if s != {"$ref": f"#/$defs/{name}"}}},
        "x-canonflow-records": {name: f"#/$defs/{name}" for name in records},
        # the values of a record's `provider` (topics.runtimes), with their runtimes' names
        "x-canonflow-providers": {r.id: r.name for r in RUNTIMES},
    }
    return doc


def _describe_tag(component: dict) -> None:
    """Describe a tagged record's `type` (msgspec writes the tag field without one)."""
    tag = component.get("properties", {}).get("type")
    if tag is None or "description" in tag or len(tag.get("enum", ())) != 1:
        return
    (value,) = tag["enum"]
    tag["description"] = (f"The record's type, always \"{value}\" here: what a reader "
                          "dispatches on, and what fixes the shape of the other fields.")


def schema_json() -> bytes:
    """The schema document as stable, pretty JSON (the committed file's bytes)."""
    return (json.dumps(schema(), indent=2, sort_keys=True) + "\n").encode()
