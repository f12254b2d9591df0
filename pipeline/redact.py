"""Redaction: what must never leave the worker, removed before anything is published.

Agents print secrets: API keys in an `env` dump, a token in a curl command, a
password in a config file they read. Every canonical event passes through the
`Redactor` right before it is encoded for a topic (and in `canonflow replay`), so
consumers never see what matched:

* built-in patterns (on unless CANONFLOW_REDACT=off): cloud and API key formats,
  bearer tokens, private key blocks, and `password=` / `"api_key": "..."` style
  assignments; each match becomes "[REDACTED]";
* CANONFLOW_REDACT_PATTERNS: more regular expressions, one per line;
* CANONFLOW_REDACT_HOOK=module:function: the operator's own function, given each
  event as a dict; it returns the event to publish (changed, e.g. a tool input
  removed) or None to publish it unchanged. Events are never dropped: a consumer
  relies on gapless `seq`.

Patterns run on the event's JSON text and only ever match characters that cannot
end a JSON string (no quote, no backslash), so redacted JSON stays valid. Nothing
from a record is ever evaluated or executed: the hook is the operator's code,
named in the worker's configuration.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

MASK = b"[REDACTED]"

# Token characters only: a match can never swallow a JSON quote or escape.
_TOKEN = r"[A-Za-z0-9_\-./+=]"
BUILTIN_PATTERNS: tuple[str, ...] = (
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
    r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}",  # OpenAI / Anthropic style keys
    r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",  # GitHub tokens
    r"\bxox[baprs]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"\bAIza[0-9A-Za-z_\-]{35}\b",  # Google API keys
    r"(?i)\bbearer\s+" + _TOKEN + r"{16,}",  # Authorization: Bearer ...
    # a PEM block, its newlines escaped in the JSON text
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:[^\"\\]|\\n)*?-----END [A-Z ]*PRIVATE KEY-----",
    # NAME=value / NAME: value / "name": "value" for secret-looking names (the name
    # must end there: `apiKeySource` is not a key)
    r"(?i)(?:(?<=\\[ntr])|(?<![A-Za-z0-9]))(?:password|passwd|secret|api[_-]?key"
    r"|access[_-]?key|auth[_-]?token|client[_-]?secret)(?:[_-]?key)?(?![A-Za-z0-9])"
    r"(?:\\\"|\")?\s*[:=]\s*(?:\\\"|\"){0,2}\K" + _TOKEN + "{4,}",
)


class RedactionError(ValueError):
    """The redaction settings are invalid (a bad pattern, a hook that cannot be loaded)."""


def _compile(patterns: list[str]) -> Any:
    """One alternation of all patterns; `\\K` (keep-left) is emulated with a group."""
    parts = []
    for p in patterns:
        flags = ""
        if p.startswith("(?i)"):  # a global flag inside an alternation must be scoped
            flags, p = "i", p[4:]
        head, keep, tail = p.partition("\\K")
        if not keep:
            head, tail = "", head
        parts.append(f"(?{flags}:{head})(?P<k{len(parts)}>(?{flags}:{tail}))" if flags
                     else f"(?:{head})(?P<k{len(parts)}>{tail})")
    try:
        return re.compile("|".join(parts).encode())
    except re.error as e:
        raise RedactionError(f"invalid redaction pattern: {e}") from None


#: Substrings (lower case) one of which every built-in pattern's match contains. An
#: event without any of them cannot match, and most events (text deltas) have none:
#: measured, running the patterns on every event cost a tenth of the worker's time.
BUILTIN_TRIGGERS: tuple[bytes, ...] = (
    b"akia", b"sk-", b"gh", b"xox", b"aiza", b"bearer", b"private key", b"pass", b"secret",
    b"key", b"token",
)


class Redactor:
    """Applies the patterns and the hook to encoded events."""

    def __init__(self, patterns: list[str], hook: Callable[[dict[str, Any]], Any] | None = None):
        self.patterns = list(patterns)
        self._regex = _compile(self.patterns) if self.patterns else None
        self.hook = hook
        # the cheap test only holds for the built-in patterns alone
        self._triggers = BUILTIN_TRIGGERS if self.patterns and set(self.patterns) <= set(
            BUILTIN_PATTERNS) else None

    @property
    def active(self) -> bool:
        return self._regex is not None or self.hook is not None

    def _mask(self, m: re.Match[bytes]) -> bytes:
        whole = m.group(0)
        for name, value in m.groupdict().items():
            if value is not None:
                start, end = m.span(name)
                offset = m.start(0)
                return whole[: start - offset] + MASK + whole[end - offset:]
        return MASK

    def apply(self, encoded: bytes) -> bytes:
        """The event to publish (JSON bytes)."""
        if self._regex is not None:
            lowered = encoded.lower() if self._triggers is not None else b""
            if self._triggers is None or any(t in lowered for t in self._triggers):
                encoded = self._regex.sub(self._mask, encoded)
        if self.hook is not None:
            result = self.hook(json.loads(encoded))
            if result is not None:
                encoded = json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode()
        return encoded

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Redactor:
        """CANONFLOW_REDACT (on|off), CANONFLOW_REDACT_PATTERNS, CANONFLOW_REDACT_HOOK.

        Raises RedactionError for an invalid pattern or a hook that cannot be loaded.
        """
        env = os.environ if env is None else env
        mode = env.get("CANONFLOW_REDACT", "on").strip().lower()
        if mode not in ("on", "off", "true", "false", "1", "0", "yes", "no"):
            raise RedactionError(f"CANONFLOW_REDACT={mode!r}: use on or off")
        patterns = list(BUILTIN_PATTERNS) if mode in ("on", "true", "1", "yes") else []
        patterns += [p for p in env.get("CANONFLOW_REDACT_PATTERNS", "").splitlines() if p.strip()]
        hook_name = env.get("CANONFLOW_REDACT_HOOK", "").strip()
        return cls(patterns, load_hook(hook_name) if hook_name else None)


def load_hook(name: str) -> Callable[[dict[str, Any]], Any]:
    """`package.module:function`. Raises RedactionError when it cannot be loaded."""
    module_name, _, attr = name.partition(":")
    if not module_name or not attr:
        raise RedactionError(f"CANONFLOW_REDACT_HOOK={name!r}: use module:function")
    try:
        hook = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise RedactionError(f"cannot load redaction hook {name!r}: {e}") from None
    if not callable(hook):
        raise RedactionError(f"redaction hook {name!r} is not callable")
    return hook  # type: ignore[no-any-return]
