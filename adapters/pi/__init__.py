"""pi `pi --mode json` and `pi --mode rpc` -> canonical events.

The package is the runtime's `Translator` (adapters.core.record): its translator is
`translator.py` (compiled with mypyc, setup.py), its stored state `state.py`.
Registered in topics.runtimes."""

from adapters.pi.translator import (
    IGNORED,
    initial,
    message_id,
    provider,
    raw_source,
    state_type,
    translate,
)

__all__ = ["IGNORED", "initial", "message_id", "provider", "raw_source", "state_type",
           "translate"]
