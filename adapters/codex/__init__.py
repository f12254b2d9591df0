"""Codex app-server (JSON-RPC 2.0, both directions) -> canonical events.

The package is the runtime's `Translator` (adapters.core.record): its entry point and
dispatch table are `translator.py`, whose docstring lists the modules the handlers live in
(all compiled with mypyc, setup.py), its stored state `state.py` (never compiled: mypyc
drops class keywords). Registered in topics.runtimes."""

from adapters.codex.translator import (
    IGNORED,
    initial,
    message_id,
    origin_of,
    provider,
    raw_source,
    state_type,
    translate,
)

__all__ = ["IGNORED", "initial", "message_id", "origin_of", "provider", "raw_source", "state_type",
           "translate"]
