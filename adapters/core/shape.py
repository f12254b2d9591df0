"""Shape checks for native values, where a translator reads them.

A native value of the wrong shape is the input's fault: MalformedRecord. Any other
exception out of a translator is canonflow's (InternalError, adapters.core.record), so
a translator checks what it reads rather than trust it: `.get` and isinstance, or
these helpers.
"""

from __future__ import annotations

from typing import Any

from adapters.core.contract import MalformedRecord


def native_list(value: Any, what: str) -> list[Any]:
    """`value` as a list: [] when it is absent, null or empty. Raises MalformedRecord
    for anything else that is not a list (`what` names the field)."""
    if not value:
        return []
    if isinstance(value, list):
        return value
    raise MalformedRecord(f"{what} must be a list, not {type(value).__name__}")


_MAX_COUNT = 2**53  # a token count past this is no real count (JSON's exact integers)


def native_count(obj: Any, *keys: str) -> int:
    """The first of `keys` in the dict `obj` that holds a token count, as an int; 0 when
    none does. A count that is not a whole number from 0 to 2**53 (a string, a bool,
    a negative or fractional number) is no count: it reads as absent, never raises, so
    one odd field costs a turn that field's tokens, not the turn."""
    if not isinstance(obj, dict):
        return 0
    for key in keys:
        value = obj.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if 0 <= value <= _MAX_COUNT and value == int(value):
            return int(value)
    return 0
