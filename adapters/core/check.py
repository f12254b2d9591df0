"""The payload check: a canonical event whose payload a consumer cannot decode never
leaves canonflow.

A translator copies native values into payload fields; a value of the wrong type (a
runtime that sends a number where its schema says a string) would encode to an event
its own type refuses to decode. `check_payload` raises msgspec.ValidationError (a
ValueError) for such a payload, and the driver (adapters.core.record) fails the line.

Two ways, one answer:

* the round trip (`round_trip`) decides: the payload encoded to JSON and decoded as its
  type, the way a consumer reads it; `Any` values are skipped there, not built
  (`_check_type`);
* most payloads never need it: `plain` reads the payload field by field, against a
  spec made once per type from its annotations (`_spec`), and says True only where the
  round trip is bound to pass: every value of exactly its field's type, strings without
  a lone surrogate (the encoder refuses one), floats finite (the encoder writes NaN as null,
  which a float field refuses), `Any` values made of JSON's own types and at most
  MAX_DEPTH deep. Anything else (False) goes to the round trip, which decides; a type
  `_spec` cannot read (a tag, array_like, a union of two kinds, ...) always does.

Compiled (setup.py), the check costs half the instructions it did with the round trip
alone on the captured mix (callgrind: 6.8k -> 3.9k a message): the round trip encodes
the payload's Python values and decodes the JSON again, `plain` reads each value once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import UnionType
from typing import Any, Final, Literal, Union, cast, get_args, get_origin

import msgspec
from msgspec import Struct, UnsetType

UNSET: Final = msgspec.UNSET
_encode: Final = msgspec.json.Encoder().encode

#: How deep `plain` follows an `Any` value (lists and dicts in one another); deeper, the
#: round trip decides (the encoder's own limit is the interpreter's recursion limit).
MAX_DEPTH: Final = 32


# ---- The round trip ----------------------------------------------------------------

# `Any`-typed field shapes whose values the check skips over instead of building them
# (msgspec.Raw): every JSON value is a valid `Any`, so decoding one can only fail as
# skipping it fails (too deep: the same RecursionError at the same depth, measured).
_SKIP_ANY: dict[Any, Any] = {
    Any: msgspec.Raw,
    dict[str, Any]: dict[str, msgspec.Raw],
    list[Any]: list[msgspec.Raw],
}


def unannotated(tp: Any) -> Any:
    """`T` of a field annotated `Annotated[T, Meta(description=...)]` (the contract's
    fields are), else `tp`: a description changes nothing the check reads."""
    return tp.__origin__ if hasattr(tp, "__metadata__") else tp


def _skip_any(annotated: Any) -> Any:
    tp = unannotated(annotated)
    if tp in _SKIP_ANY:
        return _SKIP_ANY[tp]
    if get_origin(tp) in (Union, UnionType):
        args = get_args(tp)
        new = tuple(_SKIP_ANY.get(a, a) for a in args)
        if new != args:
            return Union[new]  # noqa: UP007  # a tuple of types, built at run time
    return annotated


def _special(cls: type) -> bool:
    """Whether `cls` has what neither the twin nor the spec reproduces."""
    config = cls.__struct_config__  # type: ignore[attr-defined]
    return bool(config.tag is not None or config.array_like or config.forbid_unknown_fields
                or hasattr(cls, "__post_init__"))


def _check_type(cls: type) -> Any:
    """The type the round trip decodes `cls`'s JSON as: a twin of `cls` with the
    same fields (names, wire names, types, defaults), except that the values of its
    `Any` fields are skipped instead of built as Python objects. The twin accepts
    exactly the JSON `cls` accepts and fails on the rest with the same error; it only
    saves building the dicts and lists the check throws away (half its time: a
    session's whole configuration, token usage, tool input). `cls` itself when it has
    no such field or anything the twin might not reproduce (a tag, array_like,
    forbid_unknown_fields, __post_init__)."""
    if _special(cls):
        return cls
    fields = msgspec.structs.fields(cls)
    spec: list[tuple[str, Any, Any]] = []
    for f in fields:
        if f.required:
            default = msgspec.field()
        elif f.default_factory is not msgspec.NODEFAULT:
            default = msgspec.field(default_factory=f.default_factory)
        else:
            default = msgspec.field(default=f.default)
        spec.append((f.name, _skip_any(f.type), default))
    if all(tp is f.type for (_, tp, _), f in zip(spec, fields, strict=True)):
        return cls
    return msgspec.defstruct(f"{cls.__name__}Check", spec, kw_only=True,
                             rename={f.name: f.encode_name for f in fields})


_decoders: Final[dict[type, Any]] = {}


def round_trip(payload: Struct) -> None:
    """The check by a JSON round trip, the way a consumer reads the payload. Raises
    msgspec.ValidationError (or the encoder's TypeError, UnicodeEncodeError,
    RecursionError) when it would not decode as its own type."""
    cls = type(payload)
    decoder = _decoders.get(cls)
    if decoder is None:
        decoder = _decoders[cls] = msgspec.json.Decoder(_check_type(cls)).decode
    decoder(_encode(payload))


# ---- The field-by-field check --------------------------------------------------------

# What a field holds, besides UNSET and None where its type allows them
_STR: Final = 0
_INT: Final = 1
_FLOAT: Final = 2
_BOOL: Final = 3
_LITERAL: Final = 4  # one of the strings in `arg` (a frozenset)
_ANY: Final = 5
_ANY_IN: Final = 6  # an `Any` value in a container of exactly the type `arg` (dict, list)
_LIST_STR: Final = 7
_STRUCT: Final = 8  # a struct of exactly the type `arg`
_LIST_STRUCT: Final = 9

#: One field: (its kind, UNSET allowed, None allowed, the kind's argument).
Field = tuple[int, bool, bool, Any]
_KINDS: Final[dict[Any, int]] = {
    str: _STR, int: _INT, float: _FLOAT, bool: _BOOL, Any: _ANY, list[str]: _LIST_STR,
}
_ANY_CONTAINERS: Final[dict[Any, type]] = {dict[str, Any]: dict, list[Any]: list}
_specs: Final[dict[type, tuple[Field, ...] | None]] = {}


def _field(tp: Any) -> Field | None:
    """The spec of a field of type `tp`; None when `plain` cannot read it."""
    tp = unannotated(tp)
    args = get_args(tp) if get_origin(tp) in (Union, UnionType) else (tp,)
    unset = UnsetType in args
    none = type(None) in args
    rest = [a for a in args if a is not UnsetType and a is not type(None)]
    if len(rest) != 1:
        return None
    one = rest[0]
    if one in _KINDS:
        return (_KINDS[one], unset, none, None)
    if one in _ANY_CONTAINERS:
        return (_ANY_IN, unset, none, _ANY_CONTAINERS[one])
    if get_origin(one) is Literal and all(type(v) is str for v in get_args(one)):
        return (_LITERAL, unset, none, frozenset(get_args(one)))
    if isinstance(one, type) and issubclass(one, Struct) and _spec(one) is not None:
        return (_STRUCT, unset, none, one)
    if get_origin(one) is list:
        (item,) = get_args(one)
        if isinstance(item, type) and issubclass(item, Struct) and _spec(item) is not None:
            return (_LIST_STRUCT, unset, none, item)
    return None


def _spec(cls: type) -> tuple[Field, ...] | None:
    """Each field of `cls` in order (msgspec.structs.astuple's), or None when `plain`
    cannot read one of them or `cls` is special (then the round trip always decides)."""
    if cls in _specs:
        return _specs[cls]
    _specs[cls] = None  # special, or a struct that holds itself: the round trip reads it
    if _special(cls):
        return None
    fields: list[Field] = []
    for f in msgspec.structs.fields(cls):
        got = _field(f.type)
        if got is None:
            return None
        fields.append(got)
    spec = _specs[cls] = tuple(fields)
    return spec


_astuple: Final = msgspec.structs.astuple
# str's methods as Final names: compiled, a method call on an `object` is a lookup by name
_isascii: Final[Callable[[object], bool]] = str.isascii  # type: ignore[assignment]
_utf8: Final[Callable[[object], bytes]] = str.encode  # type: ignore[assignment]


def plain(payload: Struct) -> bool:
    """Whether the round trip is bound to pass `payload`, seen field by field (False: the
    round trip decides)."""
    cls = type(payload)
    spec = _specs.get(cls)
    if spec is None:
        if cls in _specs:  # a type the round trip always decides
            return False
        spec = _spec(cls)
        if spec is None:
            return False
    return _plain_fields(_astuple(payload), spec)


def _plain_fields(values: tuple[Any, ...], spec: tuple[Field, ...]) -> bool:
    for i in range(len(spec)):
        value: object = values[i]
        kind, unset, none, arg = spec[i]
        if value is UNSET:
            if not unset:  # left off the wire: a required field would be missing
                return False
        elif value is None:
            if not none:
                return False
        elif kind == _STR:
            if not _text(value):
                return False
        elif kind == _LITERAL:
            if type(value) is not str or value not in arg:
                return False
        elif kind == _INT:
            if type(value) is not int:
                return False
        elif kind == _BOOL:
            if type(value) is not bool:
                return False
        elif kind == _FLOAT:
            if type(value) is not float or not math.isfinite(cast(float, value)):
                return False
        elif kind == _ANY:
            if not _plain_any(value, 0):
                return False
        elif kind == _ANY_IN:
            if type(value) is not arg or not _plain_any(value, 0):
                return False
        elif kind == _LIST_STR:
            if type(value) is not list:
                return False
            for s in cast(list[object], value):
                if not _text(s):
                    return False
        elif kind == _STRUCT:
            if type(value) is not arg or not plain(cast(Struct, value)):
                return False
        else:  # _LIST_STRUCT
            if type(value) is not list:
                return False
            for s in cast(list[object], value):
                if type(s) is not arg or not plain(cast(Struct, s)):
                    return False
    return True


def _text(value: object) -> bool:
    """A str (exactly) the encoder takes: one without a lone surrogate, which its UTF-8
    refuses (str.encode's strict UTF-8 refuses the same); ASCII is seen without encoding."""
    if type(value) is not str:
        return False
    if _isascii(value):
        return True
    try:
        _utf8(value)
    except UnicodeEncodeError:
        return False
    return True


def _plain_any(value: object, depth: int) -> bool:
    """Whether `value` is JSON's own: str (_text), int, float (NaN goes out as null, which
    an `Any` takes), bool, None, and lists and dicts (str keys) of them, exactly those
    types (a subclass may encode as something else), at most MAX_DEPTH deep."""
    kind = type(value)
    if kind is str:
        return _text(value)
    if kind is int or kind is float or kind is bool or value is None:
        return True
    if depth >= MAX_DEPTH:
        return False
    if kind is dict:
        for k, v in cast(dict[object, object], value).items():
            if not _text(k) or not _plain_any(v, depth + 1):
                return False
        return True
    if kind is list:
        for v in cast(list[object], value):
            if not _plain_any(v, depth + 1):
                return False
        return True
    return False


def check_payload(payload: Struct) -> None:
    """Raises msgspec.ValidationError (a ValueError; or the encoder's TypeError,
    UnicodeEncodeError, RecursionError) if `payload` would not decode as its own type."""
    if not plain(payload):
        round_trip(payload)
