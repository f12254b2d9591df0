"""Issue 25, finding 3: redaction changes values, never the JSON around them, so every
published event decodes (topics.canonical.decode_event) and reaches the chat.

`"password": 123456` (or null, true) became `"password":[REDACTED]`: invalid JSON on
agents.canonical, and the tool call dropped out of the chat."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.privacy.redact import MASK, SECRET_MEMBERS, Redactor, secret_member
from pipeline.tools.replay import Replayer
from pipeline.worker.normalize import Normalizer
from tests.pipeline.secret_corpus import CORPUS
from topics.canonical import decode_event, encode_event

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
_MASKED = MASK.decode()


def test_a_structured_secret_of_any_type_keeps_the_event_and_the_chat():
    item = {"id": "t", "type": "mcp_tool_call", "server": "db", "tool": "connect",
            "arguments": {"host": "db1", "password": 123456, "token": None, "secret": True,
                          "api_key": 1.5, "auth": {"user": "app", "pin": 4321, "otp": [1, 2]}},
            "status": "completed", "result": {"content": [{"type": "text", "text": "ok"}]}}
    out = Normalizer("codex-exec", redactor=Redactor.from_env({})).process(
        None, b"s", json.dumps({"type": "item.completed", "item": item}).encode(),
        partition=0, offset=0)
    events = [decode_event(r) for r in out.records]  # every one decodes
    args = events[-1].payload.input
    assert args == {"host": "db1", "password": _MASKED, "token": None, "secret": True,
                    "api_key": _MASKED,
                    "auth": {"user": _MASKED, "pin": _MASKED, "otp": [_MASKED, _MASKED]}}
    kinds = [json.loads(c)["type"] for c in out.chat]
    assert kinds == ["tool_use", "tool_result"]  # the tool is in the chat
    assert b"123456" not in b"".join(out.records + out.chat)


def test_json_held_in_a_string_stays_json():
    r = Redactor.from_env({})
    text = json.dumps({"user": "app", "password": 834211009, "note": "x"})
    event = msgspec.json.encode({"type": "runtime.warning", "payload": {"message": text}})
    inner = json.loads(json.loads(r.apply(event))["payload"]["message"])
    assert inner == {"user": "app", "password": _MASKED, "note": "x"}
    escaped = json.dumps({"cmd": "echo " + text})  # JSON in a JSON string in a string
    out = json.loads(json.loads(r.apply(msgspec.json.encode({"m": escaped})))["m"])
    assert json.loads(out["cmd"][5:]) == {"user": "app", "password": _MASKED, "note": "x"}


# -- property: any event, any secret, anywhere: the published event decodes ----------

def _capture_events() -> list[dict[str, Any]]:
    out = []
    for path in sorted(CAPTURED.glob("*/*.capture.jsonl")):
        rep = Replayer(path.parent.name)
        for i, raw in enumerate(path.read_bytes().splitlines(), 1):
            if raw.strip():
                out += [json.loads(encode_event(e)) for e in rep.feed("s", i, raw, "capture")[0]]
    return out


def _open_dicts(doc: Any, path: tuple = ()) -> list[tuple]:
    """Paths of the dicts below `doc`."""
    found = []
    if isinstance(doc, dict):
        found.append(path)
        for k, v in doc.items():
            found += _open_dicts(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += _open_dicts(v, path + (i,))
    return found


def _at(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _free_members() -> list[tuple[dict[str, Any], tuple]]:
    """(event, path of a dict in it whose members are free-form: a new member survives
    decoding as a canonical event), for the captured events."""
    slots = []
    for event in _capture_events():
        for path in _open_dicts(event):
            if not path or path[0] != "payload":
                continue
            probe = json.loads(json.dumps(event))
            _at(probe, path)["zz_probe"] = 1
            again = json.loads(encode_event(decode_event(json.dumps(probe).encode())))
            try:
                if _at(again, path).get("zz_probe") == 1:
                    slots.append((event, path))
            except (KeyError, IndexError, TypeError, AttributeError):
                pass
    return slots


SLOTS = _free_members()
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20) | st.sampled_from([s for c in CORPUS for s in c.secrets]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                               max_size=3),
    max_leaves=8)
_names = st.builds(lambda pre, word, upper: (pre + word).upper() if upper else pre + word,
                   st.sampled_from(["", "db_", "x-", "Session", "client_"]),
                   st.sampled_from(SECRET_MEMBERS), st.booleans())


def test_there_are_free_form_places_to_put_secrets():
    assert len(SLOTS) > 100


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(SLOTS) - 1), _names, _json,
       st.sampled_from([c.text for c in CORPUS]), st.text(max_size=30))
def test_every_published_event_decodes_whatever_secrets_it_held(slot, name, value, text, junk):
    event, path = SLOTS[slot]
    doc = json.loads(json.dumps(event))
    place = _at(doc, path)
    place[name] = value
    place["zz_text"] = junk + text + junk
    source = decode_event(json.dumps(doc).encode())
    data, published = Redactor.from_env({}).publisher()(source)
    assert published is not None
    again = json.loads(encode_event(decode_event(data)))
    assert again == json.loads(data)  # what is published is a canonical event, whole
    got = _at(again, path)
    assert secret_member(name)
    _check_masked(value, got[name])


def _check_masked(value: Any, got: Any) -> None:
    if value is None or isinstance(value, bool):
        assert got == value
    elif isinstance(value, (int, float, str)):
        assert got == (_MASKED if value != "" else "")
    elif isinstance(value, list):
        for v, g in zip(value, got, strict=True):
            _check_masked(v, g)
    else:
        assert list(got) == list(value)
        for k in value:
            _check_masked(value[k], got[k])


# -- arrays, objects and escaped names ----------------------------------------------

ESCAPED = [r'"pass\u0077ord"', r'"p\u0061ssword"', r'"API\u005fKEY"', r'"\u0074oken"',
           r'"client_secre\u0074"', r'"Authorizatio\u006e"']


def test_json_text_masks_a_secret_members_array_or_object_whole_and_stays_json():
    r = Redactor.from_env({})
    doc = {"user": "app", "password": ["s3cr3t-one", 42], "client_secret": {"v": "s3cr3t-two"},
           "keep": [1, {"a": "b]"}]}
    text = json.dumps(doc, indent=2)  # over lines, as a tool prints it
    out = json.loads(r.redact_text(text.encode()))
    assert out == {"user": "app", "password": _MASKED, "client_secret": _MASKED,
                   "keep": [1, {"a": "b]"}]}
    # JSON held in a JSON string (an echo of it, a record cut short): its quotes escaped
    held = json.dumps({"cmd": "echo " + json.dumps(doc)}).encode()
    inner = json.loads(json.loads(r.redact_text(held))["cmd"][5:])
    assert inner["password"] == inner["client_secret"] == _MASKED and inner["keep"] == doc["keep"]


def test_a_secret_members_value_cut_short_is_masked_to_the_end():
    r = Redactor.from_env({})
    assert r.redact_text(b'{"id": 1, "token": {"a": ["x1y2z3w4", "q') == b'{"id": 1, "token": "[REDACTED]"'


def test_a_name_with_a_json_escape_is_read_decoded_in_text_events_and_raw_records():
    r = Redactor.from_env({})
    for name in ESCAPED:
        assert secret_member(json.loads(name))
        text = ("{" + name + ': "hunter2-secret", "n": ' + name + "}").encode()
        # as text (JSON printed by a tool), and held in a JSON string
        assert b"hunter2" not in r.redact_text(text), name
        assert b"hunter2" not in r.redact_text(json.dumps({"o": text.decode()}).encode()), name
        # a raw record (a dead letter) whose only secret is the escaped name: scanned
        record = b'{"type": "x", "cfg": ' + text + b"}"
        out = r.redact_record(record)
        assert b"hunter2" not in out and json.loads(out)["cfg"]["n"] == json.loads(name), name
        # an event: its JSON decoded, so its name is read as the consumer reads it
        event = msgspec.json.encode({"type": "x", "payload": {"raw": msgspec.Raw(text)}})
        assert b"hunter2" not in r.apply(event), name


def test_names_that_only_look_secret_keep_their_values():
    r = Redactor.from_env({})
    for text in [b'{"tokens": [1, 2], "inputTokens": {"n": 1}, "caf\\u00e9": {"a": "b"}}',
                 b'{"passwords_count": [3], "\\u0070ath": ["/usr/bin"]}']:
        assert r.redact_text(text) == text
        assert r.redact_record(text) == text
