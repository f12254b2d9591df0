"""Every field of every published record is described in the schema `canonflow schema`
prints, and a field that takes a fixed set of words names each of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def printed() -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "schema"], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True,
                         capture_output=True).stdout
    return json.loads(out)


def _properties(node: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, schema) of every property of every object schema under `node`."""
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            yield f"{where}.{name}", prop
        for key, value in node.items():
            yield from _properties(value, f"{where}.{key}" if key != "$defs" else where)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _properties(value, f"{where}[{i}]")


def _words(prop: dict[str, Any]) -> list[str]:
    """The words an enum property takes (with or without null or absent beside them)."""
    for option in (prop, *prop.get("anyOf", ())):
        if "enum" in option:
            return list(option["enum"])
    return []


def test_every_property_has_a_description(printed: dict[str, Any]):
    properties = list(_properties(printed, "#"))
    assert len(properties) > 1000  # the envelope is on each of the 45 events
    missing = [where for where, prop in properties
               if not isinstance(prop.get("description"), str) or not prop["description"].strip()]
    assert not missing, f"{len(missing)} properties without a description: {missing[:20]}"


def test_every_description_is_one_line(printed: dict[str, Any]):
    multi = [where for where, prop in _properties(printed, "#")
             if "\n" in prop.get("description", "")]
    assert not multi, multi


def test_an_enum_property_names_each_of_its_words(printed: dict[str, Any]):
    vague = [(where, word) for where, prop in _properties(printed, "#")
             for word in _words(prop) if word not in prop.get("description", "")]
    assert not vague, vague


def test_stream_kind_and_item_type_say_what_is_the_assistant_answer(printed: dict[str, Any]):
    defs = printed["$defs"]
    stream = defs["ContentDeltaPayload"]["properties"]["streamKind"]["description"]
    item = defs["ItemPayload"]["properties"]["itemType"]["description"]
    # the field's name, so that nobody reads `kind`; command output is never assistant text
    assert "streamKind, not kind" in stream and "Only assistant_text" in stream
    assert "never assistant text" in stream
    assert "the field is itemType" in item and "never `text`" in item
