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

import msgspec

MASK = b"[REDACTED]"

# Token characters only: a match can never swallow a JSON quote or escape.
_TOKEN = r"[A-Za-z0-9_\-./+=]"

#: Built-in patterns. Measured on this machine (`canonflow bench`): one alternation of
#: every pattern run on every event cost 200 us per event, a tenth of the worker's
#: time. Patterns that start with a literal cost ~0.4 us each as they are; the
#: case-insensitive ones are written in lower case and run on the lower-cased text
#: (same length, so the spans carry over), which keeps them as cheap.
LITERAL_PATTERNS: tuple[str, ...] = (
    r"AKIA[0-9A-Z]{16}\b",  # AWS access key id
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}",  # OpenAI / Anthropic style keys
    r"gh[pousr]_[A-Za-z0-9]{30,}\b",  # GitHub tokens
    r"xox[baprs]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"AIza[0-9A-Za-z_\-]{35}\b",  # Google API keys
    # a PEM block, its newlines escaped in the JSON text
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:[^\"\\]|\\n)*?-----END [A-Z ]*PRIVATE KEY-----",
)
_LOWER_TOKEN = r"[a-z0-9_\-./+=]"
CASELESS_PATTERNS: tuple[str, ...] = (
    r"bearer\s+(?P<secret>" + _LOWER_TOKEN + r"{16,})",  # Authorization: Bearer ...
    # NAME=value / NAME: value / "name": "value" for secret-looking names (the name must
    # end there: `apiKeySource` is not a key); only the value is masked
    r"(?:password|passwd|secret|api[_-]?key|access[_-]?key|auth[_-]?token|client[_-]?secret)"
    r"(?:[_-]?key)?(?![a-z0-9])(?:\\\"|\")?\s*[:=]\s*(?:\\\"|\"){0,2}"
    r"(?P<secret>" + _LOWER_TOKEN + "{4,})",
)
BUILTIN_PATTERNS: tuple[str, ...] = LITERAL_PATTERNS + CASELESS_PATTERNS
#: The secret-name pattern is the one costly pattern (~6 us per event: its first
#: letters are common ones); it only runs on text holding one of these.
_NAME_HINTS = (b"passw", b"secret", b"api", b"access", b"auth")


class RedactionError(ValueError):
    """The redaction settings are invalid (a bad pattern, a hook that cannot be loaded)."""


def _compile(pattern: str) -> re.Pattern[bytes]:
    try:
        return re.compile(pattern.encode())
    except re.error as e:
        raise RedactionError(f"invalid redaction pattern {pattern!r}: {e}") from None


def _span(m: re.Match[bytes]) -> tuple[int, int]:
    """What to mask: the `secret` group when the pattern has one, else the match."""
    return m.span("secret") if "secret" in m.re.groupindex else m.span()


def _mask(text: bytes, spans: list[tuple[int, int]]) -> bytes:
    out, last = [], 0
    for start, end in sorted(spans):
        if start < last:  # overlaps what is already masked
            start = last
            if start >= end:
                continue
        out += [text[last:start], MASK]
        last = end
    out.append(text[last:])
    return b"".join(out)


class Redactor:
    """Applies the patterns and the hook to encoded events."""

    def __init__(self, patterns: list[str], hook: Callable[[dict[str, Any]], Any] | None = None):
        self.patterns = list(patterns)
        # case-insensitive built-ins match the lower-cased text; every other pattern,
        # the operator's included, matches the text as it is
        names = CASELESS_PATTERNS[1]
        self._caseless = [_compile(p) for p in self.patterns
                          if p in CASELESS_PATTERNS and p != names]
        self._names = _compile(names) if names in self.patterns else None
        self._plain = [_compile(p) for p in self.patterns if p not in CASELESS_PATTERNS]
        self.hook = hook

    @property
    def active(self) -> bool:
        return bool(self._plain or self._caseless or self._names) or self.hook is not None

    def publisher(self) -> Callable[[Any], tuple[bytes, Any]]:
        """(the bytes to publish, the event they hold) for a canonical event: what the
        chat projection must see is what consumers see, so an event the redactor changed
        is decoded again from its redacted bytes (None if a hook made it undecodable)."""
        from topics.canonical import decode_event, encode_event

        if not self.active:
            return lambda event: (encode_event(event), event)
        apply = self.apply

        def publish(event: Any) -> tuple[bytes, Any]:
            encoded = encode_event(event)
            redacted = apply(encoded)
            if redacted is encoded:
                return redacted, event
            try:
                return redacted, decode_event(redacted)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return redacted, None  # a hook's event that is no longer canonical

        return publish

    def apply(self, encoded: bytes) -> bytes:
        """The event to publish (JSON bytes): `encoded` itself when nothing matched."""
        spans = [_span(m) for rx in self._plain for m in rx.finditer(encoded)]
        if self._caseless or self._names is not None:
            lowered = encoded.lower()  # ASCII only: same length, same offsets
            spans += [_span(m) for rx in self._caseless for m in rx.finditer(lowered)]
            if self._names is not None and any(h in lowered for h in _NAME_HINTS):
                spans += [_span(m) for m in self._names.finditer(lowered)]
        if spans:
            encoded = _mask(encoded, spans)
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
