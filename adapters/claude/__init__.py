"""Claude Code / Claude Agent SDK stream-json -> canonical events.

The package is the runtime's `Translator` (adapters.core.record): its translator is
`translator.py` (the dispatch) and the modules it names, all compiled with mypyc
(setup.py), its stored state `state.py` (never compiled: mypyc drops class keywords). Registered in topics.runtimes."""

from adapters.claude.translator import (
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
