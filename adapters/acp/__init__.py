"""Agent Client Protocol v1 (JSON-RPC 2.0, both directions) -> canonical events.

The package is the runtime's `Translator` (adapters.core.record): its dispatch is
`translator.py`, its handlers the modules beside it by what the protocol talks about
(translator.py's docstring lists them), all compiled with mypyc (setup.py); its stored
state `state.py` (never compiled: mypyc drops class keywords). Registered in
topics.runtimes."""

from adapters.acp.translator import (
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
