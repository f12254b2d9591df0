"""The payload check (adapters.core.check): the round trip accepts and rejects exactly
what a payload's own type does, and the field-by-field check in front of it passes only
what the round trip passes."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters import MemorySpool, get, new_session, translate_record
from adapters.core.check import MAX_DEPTH, check_payload, plain, round_trip, unannotated
from tests.adapters.harness import read_capture
from topics.canonical import ContentDeltaPayload, ItemPayload, TurnCompletedPayload
from topics.usage import TokenUsage

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"


def _payload_types() -> list[type]:
    from topics import canonical

    out: list[type] = []
    todo = list(canonical._Payload.__subclasses__())
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(out, key=lambda c: c.__name__)


def _draw(cls: type, data: st.DataObject,
          value_of: Callable[[Any], st.SearchStrategy[Any]]) -> Any:
    """A `cls` payload: its required fields and some of the others, each value drawn
    from `value_of(the field's type)`."""
    return cls(**{f.name: data.draw(value_of(f.type)) for f in msgspec.structs.fields(cls)
                  if f.required or data.draw(st.booleans())})


_JSON_ISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=3),
    max_leaves=8)


@pytest.mark.parametrize("cls", _payload_types(), ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_the_payload_check_rejects_exactly_what_the_payload_type_rejects(cls: type,
                                                                         data: st.DataObject):
    payload = _draw(cls, data, lambda _: _JSON_ISH)
    try:
        msgspec.json.decode(msgspec.json.encode(payload), type=cls)
        valid = True
    except msgspec.ValidationError:
        valid = False
    try:
        check_payload(payload)
        checked = True
    except msgspec.ValidationError:
        checked = False
    assert checked == valid, payload


# ---- plain: only what the round trip passes --------------------------------------------

_SURROGATES = st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
                      min_size=1, max_size=2)
_TEXT = (st.text(max_size=6) | st.text(alphabet="a\u00e9\u20ac\U0001f600\ud800\udfff", max_size=4)
         | _SURROGATES)
#: Anything a translator might put into a field, right or wrong: JSON's own values and
#: their look-alikes (bools for ints, NaN, big ints, lone surrogates, tuples, sets,
#: bytes, int keys), nested past MAX_DEPTH now and then.
_NASTY_LEAF = (st.none() | st.booleans() | st.integers(-3, 3)
               | st.integers(min_value=2**62, max_value=2**70) | st.floats() | _TEXT
               | st.just(msgspec.UNSET) | st.binary(max_size=2)
               | st.builds(TokenUsage, input=st.integers(0, 9), output=st.integers(0, 9)))
_NASTY = st.recursive(
    _NASTY_LEAF,
    lambda inner: (st.lists(inner, max_size=3) | st.tuples(inner)
                   | st.dictionaries(_TEXT | st.integers(0, 3), inner, max_size=3)
                   | st.frozensets(st.integers(0, 3), max_size=2)),
    max_leaves=6)


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _value(tp: Any) -> st.SearchStrategy[Any]:
    """A value for a field of type `tp`: of its type most of the time (so that `plain`
    passes often), anything at all the rest."""
    tp = unannotated(tp)
    args = get_args(tp) if get_origin(tp) in (Union, UnionType) else (tp,)
    right: list[st.SearchStrategy[Any]] = []
    for a in args:
        if a is msgspec.UnsetType:
            right.append(st.just(msgspec.UNSET))
        elif a is type(None):
            right.append(st.none())
        elif a is str:
            right.append(_TEXT)
        elif a is int:
            right.append(st.integers() | st.booleans())
        elif a is float:
            right.append(st.floats() | st.integers(-3, 3))
        elif a is bool:
            right.append(st.booleans() | st.integers(0, 1))
        elif get_origin(a) is Literal:
            right.append(st.sampled_from([*get_args(a), "nope"]))
        elif a is Any:
            right.append(_NASTY | st.sampled_from([_deep(MAX_DEPTH - 1), _deep(MAX_DEPTH + 1)]))
        elif get_origin(a) is dict:
            right.append(st.dictionaries(_TEXT | st.integers(0, 3), _NASTY, max_size=3))
        elif get_origin(a) is list:
            (item,) = get_args(a)
            right.append(st.lists(_value(item), max_size=3))
        elif isinstance(a, type) and issubclass(a, msgspec.Struct):
            right.append(_struct(a))
    return st.one_of(*right) if right else _NASTY


def _struct(cls: type) -> st.SearchStrategy[Any]:
    fields = msgspec.structs.fields(cls)
    return st.fixed_dictionaries(
        {f.name: _value(f.type) for f in fields if f.required},
        optional={f.name: _value(f.type) for f in fields if not f.required},
    ).map(lambda kw: cls(**kw))


@pytest.mark.parametrize("cls", _payload_types(), ids=lambda c: c.__name__)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_what_the_field_by_field_check_passes_the_round_trip_passes(cls: type,
                                                                    data: st.DataObject):
    # a field's own type four times in five, anything at all the fifth
    payload = _draw(cls, data, lambda tp: st.one_of(*[_value(tp)] * 4, _NASTY))
    if plain(payload):
        round_trip(payload)  # raises if the round trip refuses what plain passed


class _Tagged(msgspec.Struct, tag="t", frozen=True):
    a: int


def test_the_field_by_field_check_declines_what_the_round_trip_refuses():
    nan = TurnCompletedPayload(state="completed", totalCostUsd=math.nan)
    surrogate = ContentDeltaPayload(streamKind="assistant_text", delta="\ud800")
    cases = [
        nan,  # written as null, which a float refuses
        surrogate,  # the encoder refuses it
        ContentDeltaPayload(streamKind="assistant_text", delta="a", contentIndex=True),
        ContentDeltaPayload(streamKind="nope", delta="a"),  # type: ignore[arg-type]
        ItemPayload(itemType="reasoning", exitCode="1"),  # type: ignore[arg-type]
        ItemPayload(itemType="reasoning", input={1: {2}}),
        ItemPayload(itemType="reasoning", input=_deep(MAX_DEPTH + 1)),
        ItemPayload(itemType=msgspec.UNSET),  # type: ignore[arg-type]
        TurnCompletedPayload(state="completed", tokens={"input": 1}),  # type: ignore[arg-type]
    ]
    for payload in cases:
        assert not plain(payload), payload
    for payload in (nan, surrogate, *cases[2:5], cases[-2]):
        with pytest.raises((msgspec.ValidationError, UnicodeEncodeError)):
            check_payload(payload)
    assert not plain(ContentDeltaPayload(streamKind="assistant_text", delta="h\u00e9\udfff"))
    assert plain(ContentDeltaPayload(streamKind="assistant_text", delta="h\u00e9 \U0001f600"))
    # a type whose wire form the spec does not model (a tag) always takes the round trip
    assert not plain(_Tagged(a=1)) and not plain(_Tagged(a=1))  # read, then cached
    check_payload(_Tagged(a=1))
    with pytest.raises(msgspec.ValidationError):
        check_payload(_Tagged(a="1"))  # type: ignore[arg-type]
    # what plain cannot tell, the round trip can still pass: a set as Any, a dict where a
    # struct goes (a JSON object either way)
    check_payload(ItemPayload(itemType="reasoning", input={"a": {2}}))
    check_payload(cases[-1])


def test_most_payloads_of_the_captured_conversations_take_the_field_by_field_check():
    """The check is there for speed: on real conversations it must decide most payloads
    itself, and every payload it passes, the round trip passes."""
    taken = total = 0
    kinds: set[str] = set()
    for path in sorted(CAPTURED.glob("*/*.capture.jsonl")):
        provider = path.parent.name
        t = get(provider)
        session, spool = new_session(t), MemorySpool()
        for n, line in enumerate(read_capture(path)):
            session, events, _ = translate_record(t, session, path.stem, [line], offset=n,
                                                  spool=spool)
            for ev in events:
                total += 1
                if plain(ev.payload):  # type: ignore[attr-defined]
                    taken += 1
                    kinds.add(type(ev.payload).__name__)  # type: ignore[attr-defined]
                    round_trip(ev.payload)  # type: ignore[attr-defined]
    assert total > 500
    assert taken / total > 0.8, (taken, total)
    assert {"ContentDeltaPayload", "ItemPayload", "TurnCompletedPayload",
            "SessionConfiguredPayload"} <= kinds
