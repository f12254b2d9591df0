"""Redaction: what must never leave the worker, removed before anything is published.

Agents print secrets: API keys in an `env` dump, a token in a curl command, a
password in a config file they read. Every canonical event passes through the
`Redactor` right before it is encoded for a topic (and in `canonflow replay`), and
so does every dead letter, so consumers never see what matched:

* built-in rules (on unless CANONFLOW_REDACT=off, `RULES`): token formats, private
  key blocks, credentials in URLs, headers, command lines and `NAME=value`
  assignments; each secret becomes "[REDACTED]";
* structured values: a JSON member whose name says secret (`"password": 123456`,
  `"client_secret": {...}`, `"token": [...]`) has its value replaced, never the JSON
  text around it, so the published event always decodes; names are read decoded
  (`"pass\\u0077ord"`), and JSON printed as text gets the same rule (secret-json-value:
  the whole value becomes "[REDACTED]");
* dead letters: the lines of a record together (`redact_lines`), so a private key
  dead-lettered line by line is masked in each of its lines;
* CANONFLOW_REDACT_PATTERNS: more regular expressions (RE2 syntax), one per line;
* CANONFLOW_REDACT_HOOK=module:function: the operator's own function, given each
  event as a dict; it returns the event to publish (changed, e.g. a tool input
  removed) or None to publish it unchanged. Events are never dropped: a consumer
  relies on gapless `seq`.

Time. Every pattern runs on RE2 (google-re2): matching is linear in the text, so no
record can freeze the worker the way backtracking did (a grep of 3,000 private-key
headers took 43 s: the old lazy PEM pattern rescanned the rest of the text from every
header). On top of that each record gets a work budget proportional to its size
(`CANONFLOW_REDACT_BUDGET`); a record that would spend more (a flood of matches) has
the rest of its secret-bearing strings masked whole: fail closed, and deterministic,
so a redelivered record publishes the same bytes under the same eventIds.

Cost. Most events hold no secret. One RE2 pass over the encoded event looks for the
keywords every rule needs (`required_literals`, derived from the patterns themselves,
so the prefilter cannot miss a match); only an event that holds one is decoded, and
then its strings, joined, get one pass of all the rules combined; a string with a
match is redacted on its own, by the rules that match it alone. The envelope fields canonflow makes itself
(ids, times, counters) are never scanned.

Nothing from a record is ever evaluated or executed: the hook is the operator's code,
named in the worker's configuration.
"""

from __future__ import annotations

import bisect
import hashlib
import importlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import msgspec

from adapters.core.hold import hold_point
from pipeline.privacy.compiled import (
    MATCH_COST,
    VALUE_COST,
    Budget,
    RedactionError,
    Span,
    compiled,
    mask,
    match_spans,
    spans_of,
)
from pipeline.privacy.literals import required_literals
from pipeline.privacy.rules import (
    BUILTIN_PATTERNS,
    ENVELOPE_FIELDS,
    MASK,
    RULES,
    SECRET_MEMBERS,
    secret_member,
)
from topics.canonical import ContentDelta
from topics.records import DeadLetter

#: The privacy room's API (the rules, the prefilter and the hold point are re-exported:
#: callers and tests name them from here).
__all__ = ["BUILTIN_PATTERNS", "DEFAULT_BUDGET", "ENVELOPE_FIELDS", "MASK", "RULES",
           "SECRET_MEMBERS", "DeadLines", "LetterRun", "RedactionError", "Redactor",
           "hold_point", "load_hook", "mask", "required_literals", "secret_member", "spans_of"]

log = logging.getLogger(__name__)

#: Work units (one per byte a pattern scans, MATCH_COST per match) a record may
#: spend, per byte of the record, and at least BUDGET_FLOOR. Measured here: RE2 scans
#: about 600 MB/s (~1.7 ns a unit) and a match with its groups costs up to ~10 us, so
#: 64 units a byte bound redaction to ~0.1 CPU-s per MB of record, whatever it holds.
DEFAULT_BUDGET = 64
_MASK_TEXT = MASK.decode()
_ASSIGNMENT = next(r.pattern for r in RULES if r.name == "secret-assignment")




class _Scanned(msgspec.Struct, omit_defaults=True, gc=False):
    """What the redactor reads of a canonical event (Redactor.suspects): its fields but
    ENVELOPE_FIELDS, which `_walk` skips. Checked at import against the event's fields."""

    sessionId: Any = msgspec.UNSET
    agentId: Any = msgspec.UNSET
    parentAgentId: Any = msgspec.UNSET
    providerRefs: Any = msgspec.UNSET
    raw: Any = msgspec.UNSET
    payload: Any = msgspec.UNSET


if set(_Scanned.__struct_fields__) != set(ContentDelta.__struct_fields__) - ENVELOPE_FIELDS:
    raise ImportError("Redactor.suspects reads the fields of a canonical event that are not "
                      f"ENVELOPE_FIELDS: {sorted(set(ContentDelta.__struct_fields__) - ENVELOPE_FIELDS)}"
                      f", not {list(_Scanned.__struct_fields__)}")
_encode_lines = msgspec.json.Encoder().encode_lines
_encode = msgspec.json.encode
_UNSET = msgspec.UNSET


# ---------------------------------------------------------------------------
# The Redactor
# ---------------------------------------------------------------------------


def _lines_hit(data: bytes, span: tuple[int, int], line: int, pos: int
               ) -> tuple[int, int, int]:
    """For a prefilter match `span` found from `pos`, where line `line` begins, in `data`
    (lines, each ending in a line end): the first line the match touches, the line after
    its last, and where that line begins (the scan goes on there)."""
    first = line + data.count(b"\n", pos, span[0])
    end = data.find(b"\n", max(span[1] - 1, span[0]))  # the end of its last line
    return first, first + data.count(b"\n", span[0], end) + 1, end + 1


class Redactor:
    """Applies the rules, the structured-value rule and the hook to encoded events,
    and the rules to dead letters."""

    def __init__(self, patterns: list[str], hook: Callable[[dict[str, Any]], Any] | None = None,
                 *, budget: int = DEFAULT_BUDGET, deadletter_original: bool = False):
        self.patterns = list(dict.fromkeys(patterns))
        self.hook = hook
        self.budget = budget
        #: keep dead letters' original bytes (CANONFLOW_DEADLETTER_ORIGINAL)
        self.deadletter_original = deadletter_original
        #: the JSON-member rule comes with the built-in assignment rule
        self.members = _ASSIGNMENT in self.patterns
        rules = compiled(tuple(self.patterns), self.members)
        self._rules = rules.rules
        self.budget_exceeded = 0  # records that ran out of budget (fail closed)
        self.work = 0  # work units spent so far (bytes scanned, matches): tests count it
        self._always = rules.always
        self._min = rules.min
        # all patterns built in: see _strings
        self._joined = all(p in BUILTIN_PATTERNS for p in self.patterns)
        self._json_prefilter = rules.json_prefilter
        self._text_prefilter = rules.text_prefilter
        self._detector = rules.detector
        self._set = rules.set

    @property
    def active(self) -> bool:
        return bool(self._rules) or self.hook is not None

    # -- events ------------------------------------------------------------

    @property
    def hold(self) -> Callable[[str], int] | None:
        """The hold policy for the conversation core (hold_point), when redacting."""
        return hold_point if self.active else None

    def publisher(self) -> Callable[[Any], tuple[bytes, Any]]:
        """(the bytes to publish, the event they hold) for a canonical event: what the
        chat projection must see is what consumers see, so an event the redactor changed
        is decoded again from its redacted bytes (None if a hook made it undecodable)."""
        from topics.canonical import encode_event

        if not self.active:
            return lambda event: (encode_event(event), event)
        redacted = self._redacted()
        return lambda event: redacted(encode_event(event), event)

    def record_publisher(self) -> Callable[[Sequence[Any]], list[tuple[bytes, Any]]]:
        """`publisher()` for the events of one record, in order: one prefilter scan over
        all of their encoded bytes (`_matched`) names the events `apply` may change, and
        only those go through it; every other event's bytes are what `apply` returns for
        it. The worker's per-event scan cost 1.6 us an event, one scan a record 0.8."""
        from topics.canonical import encode_event

        if not self.active or self.hook is not None or self._always:
            publish = self.publisher()
            return lambda events: [publish(e) for e in events]
        redacted, matched = self._redacted(), self._matched

        def publish_all(events: Sequence[Any]) -> list[tuple[bytes, Any]]:
            out = [(encode_event(e), e) for e in events]
            for i in matched([data for data, _ in out]):
                out[i] = redacted(*out[i])
            return out

        return publish_all

    def _redacted(self) -> Callable[[bytes, Any], tuple[bytes, Any]]:
        """(the bytes to publish, the event they hold) for an encoded event and the event."""
        from topics.canonical import decode_event

        apply = self.apply

        def redacted(encoded: bytes, event: Any) -> tuple[bytes, Any]:
            out = apply(encoded)
            if out is encoded:
                return out, event
            try:
                return out, decode_event(out)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return out, None  # a hook's event that is no longer canonical

        return redacted

    def _matched(self, encoded: Sequence[bytes]) -> list[int]:
        """The positions, in order, of the `encoded` events (JSON, one line each) in
        which the JSON prefilter may match: one scan of them joined by line ends. A
        match there that `apply`'s own scan of one event would find is found here too
        (no rule is anchored; the character before an event is a line end, which `\b`
        reads as it reads the start of the text), and a match that runs across a line end
        names every event it touches; after a match the scan goes on at the next event."""
        data = b"\n".join([*encoded, b""])
        prefilter = self._json_prefilter
        found: list[int] = []
        line = pos = 0  # the event that begins at pos
        while (span := prefilter(data, pos)) is not None:
            first, line, pos = _lines_hit(data, span, line, pos)
            found.extend(range(first, line))
        return found

    def suspects(self, events: Sequence[Any]) -> list[int] | None:
        """The positions, in order, of the canonical `events` that `apply` may change:
        those whose fields outside the envelope hold one of the rules' literals. Every
        other event's encoded bytes are what `apply` returns for it. None when any event
        may change (a hook, a rule without a provable literal).

        One prefilter pass over what the redactor reads of the events (`_Scanned`: the
        fields `_walk` does not skip), each field encoded by msgspec as in the event, so
        it holds the same JSON text there. The envelope (ids, times, counters: two
        thirds of a delta's bytes, canonflow's own) is never scanned, and a session id or
        providerRefs equal to the event before's is left out (the deltas of an item share
        them): when one holds a literal, so do the events after it that left it out."""
        if self.hook is not None or (self._rules and self._always):
            return None
        if not self._rules or not events:
            return []
        sid = refs = None  # the last written
        view = [_Scanned(_UNSET if (s := e.sessionId) == sid else (sid := s), e.agentId,
                         e.parentAgentId, _UNSET if (r := e.providerRefs) == refs else (refs := r),
                         e.raw, e.payload) for e in events]
        data = _encode_lines(view)
        prefilter = self._json_prefilter
        found: list[int] = []
        line = pos = 0  # the line that begins at pos
        while (span := prefilter(data, pos)) is not None:
            first, line, pos = _lines_hit(data, span, line, pos)
            found.extend(range(first, line))
            # the events after it that left out its session id or providerRefs (equal
            # to the one before's) hold what it holds
            while line < len(view):
                prev, v = events[line - 1], view[line]
                if not ((v.sessionId is _UNSET and prefilter(_encode(prev.sessionId)) is not None)
                        or (v.providerRefs is _UNSET and events[line].providerRefs is not _UNSET
                            and prefilter(_encode(prev.providerRefs)) is not None)):
                    break
                found.append(line)
                line += 1
                pos = data.find(b"\n", pos) + 1
        return found

    def apply(self, encoded: bytes) -> bytes:
        """The event to publish (JSON bytes): `encoded` itself when nothing matched.

        Values are redacted, never the JSON text around them: the result decodes
        whenever `encoded` did. Bytes that are not JSON are redacted as text."""
        if self._rules and (self._always or self._json_prefilter(encoded) is not None):
            try:
                doc = msgspec.json.decode(encoded)
            except msgspec.DecodeError:
                encoded = self.redact_text(encoded)
            else:
                budget = Budget(len(encoded), self.budget)
                if self._walk(doc, budget, envelope=True):
                    encoded = msgspec.json.encode(doc)
                self._done(len(encoded), budget)
        if self.hook is not None:
            result = self.hook(json.loads(encoded))
            if result is not None:
                encoded = json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode()
        return encoded

    def _walk(self, doc: Any, budget: Budget, *, envelope: bool = False) -> bool:
        """Redact every string of a decoded JSON document in place (and each value
        whose member name says secret); True if anything changed."""
        changed = False
        shortest = self._min
        # (container, member name or index, is the name itself) of every string to scan
        slots: list[tuple[Any, Any, bool]] = []
        texts: list[str] = []
        stack: list[Any] = [doc]
        top = envelope
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                for k, v in node.items():
                    if top and k in ENVELOPE_FIELDS:
                        continue
                    if self.members and secret_member(k):
                        masked = _mask_all(v)
                        if masked is not v:
                            node[k] = masked
                            changed = True
                    elif isinstance(v, str):
                        if len(v) >= shortest:
                            slots.append((node, k, False))
                            texts.append(v)
                    elif isinstance(v, (dict, list)):
                        stack.append(v)
                    if len(k) >= shortest:
                        slots.append((node, k, True))
                        texts.append(k)
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    if isinstance(v, str):
                        if len(v) >= shortest:
                            slots.append((node, i, False))
                            texts.append(v)
                    elif isinstance(v, (dict, list)):
                        stack.append(v)
            top = False
        if not texts:
            return changed
        renamed: dict[int, tuple[dict[str, Any], list[tuple[str, str]]]] = {}
        for i, new in self._strings(texts, budget):
            node, k, is_name = slots[i]
            if is_name:
                renamed.setdefault(id(node), (node, []))[1].append((k, new))
            else:
                node[k] = new
            changed = True
        for node, names in renamed.values():
            _rename(node, names)
        return changed

    def _strings(self, texts: list[str], budget: Budget
                 ) -> Iterator[tuple[int, str]]:
        """(index, redacted text) of each of `texts` that redaction changes.

        Built-in rules only: one pass of the combined rules over all of the texts
        joined by newlines finds the texts to redact, each then on its own. No rule
        sees the text around a string except through `^`/`\b` (a newline there is what
        the start of a string is to them), and a match that runs across a newline
        sends every text it touches to be redacted on its own, so this finds every
        text that alone would match. An operator's pattern may look further: then
        every text gets its own pass."""
        if not self._joined:
            for i, s in enumerate(texts):
                new = self._string(s, budget)
                if new is not s:
                    yield i, new
            return
        datas = [s.encode("utf-8", "surrogatepass") for s in texts]
        joined = b"\n".join(datas)
        starts, at = [], 0
        for d in datas:
            starts.append(at)
            at += len(d) + 1
        budget.scanned(len(joined))
        detector = self._detector
        pos, done = 0, -1
        while pos < len(joined):
            span = detector(joined, pos)
            if span is None:
                break
            first = max(done + 1, bisect.bisect_right(starts, span[0]) - 1)
            last = max(first, bisect.bisect_right(starts, span[1] - 1) - 1)
            for i in range(first, last + 1):
                scanned = self._scan(datas[i], budget)
                if scanned is not datas[i]:
                    yield i, scanned.decode("utf-8", "surrogatepass")
            # on from the newline after it: a match may start there ([ \t\r\n]-p'...)
            done, pos = last, starts[last] + len(datas[last])

    def _string(self, s: str, budget: Budget) -> str:
        if len(s) < self._min:
            return s
        data = s.encode("utf-8", "surrogatepass")
        new = self._scan(data, budget)
        return s if new is data else new.decode("utf-8", "surrogatepass")

    def _scan(self, data: bytes, budget: Budget) -> bytes:
        """One string's bytes, redacted (`_spans`)."""
        spans = self._spans(data, budget)
        return mask(data, spans) if spans else data

    def _spans(self, data: bytes, budget: Budget) -> list[Span]:
        """What to mask in `data`: one pass of every rule at once; the rules that
        matched run again for their spans. Past the budget, text with a match is
        masked whole from where the budget ran out."""
        assert self._set is not None
        budget.scanned(len(data))
        if self._detector(data) is None:
            return []
        whole = [(0, len(data), MASK)]
        if budget.left < 0 or not budget.spend(len(data)):
            return whole
        hits = self._set.Match(data) or range(len(self._rules))  # None: DFA gave up
        spans: list[Span] = []
        for i in hits:
            rule = self._rules[i]
            if not budget.spend(len(data)):
                return whole
            for m in rule.rx.finditer(data):
                if not budget.spend(MATCH_COST):
                    spans.append((m.start(), len(data), MASK))  # fail closed from here
                    return spans
                got = match_spans(m, rule.names)
                # the bytes value_end read, at VALUE_COST a byte (Python, not RE2)
                if rule.values and not budget.spend(
                        VALUE_COST * sum(e - s for s, e, _ in got)):
                    spans.append((m.start(), len(data), MASK))
                    return spans
                spans += got
        return spans

    def _done(self, size: int, budget: Budget) -> None:
        self.work += budget.spent
        if budget.left >= 0:
            return
        self.budget_exceeded += 1
        log.warning("redaction budget exceeded on a record of %d bytes (%d work units): "
                    "its remaining strings with a secret were masked whole", size,
                    budget.spent)

    # -- text and dead letters ---------------------------------------------

    def redact_text(self, data: bytes) -> bytes:
        """`data` (any bytes) with the rules applied as text, within a budget: `data`
        itself when nothing matched."""
        if not self._rules:
            return data
        budget = Budget(len(data), self.budget)
        out = self._scan(data, budget) if len(data) >= self._min else data
        self._done(len(data), budget)
        return out

    def redact_record(self, data: bytes) -> bytes:
        """A raw record (NDJSON, or bytes that are not even UTF-8), redacted as its
        lines are (`redact_lines`). `data` itself when nothing matched."""
        if not self._suspect(data):
            return data
        lines = data.split(b"\n")
        out = self.redact_lines(lines)
        return data if all(a is b for a, b in zip(out, lines, strict=True)) else b"\n".join(out)

    def redact_lines(self, lines: Sequence[bytes], which: Iterable[int] | None = None
                     ) -> list[bytes]:
        """The lines of one text (a raw record's, or records of one line each that
        follow one another), redacted: each line that is JSON by value (as events are),
        any other as text, and a match that runs across lines (a private key printed
        over many) masked in every line it touches, that line then read as text.
        `which`: the lines to redact (all when None); the others, and the lines nothing
        matched in, are returned as they are (the same objects)."""
        out = list(lines)
        if not self._rules:
            return out
        wanted = range(len(lines)) if which is None else sorted(set(which))
        size = sum(len(ln) + 1 for ln in lines)
        budget = Budget(size, self.budget)
        across = self._across(lines, budget) if len(lines) > 1 else {}
        for i in wanted:
            line = lines[i]
            if i in across:
                out[i] = mask(line, across[i])
            elif self._suspect(line):
                out[i] = self._line(line, budget)
        self._done(size, budget)
        return out

    def _suspect(self, data: bytes) -> bool:
        """Whether a rule may match raw text `data`: its literals as they are, or a
        JSON escape (a member name such as "pass\\u0077ord" says secret once decoded)."""
        return bool(self._rules) and (self._always or self._text_prefilter(data) is not None
                                      or self._json_prefilter(data) is not None)

    def _across(self, lines: Sequence[bytes], budget: Budget) -> dict[int, list[Span]]:
        """For each line that a match running across a line end touches: the spans of
        every match on it, cut to the line (a piece after the first is masked whole)."""
        joined = b"\n".join(lines)
        if not self._suspect(joined):
            return {}
        spans = self._spans(joined, budget)
        if not any(joined.find(b"\n", s, e) >= 0 for s, e, _ in spans):
            return {}
        starts, at = [], 0
        for ln in lines:
            starts.append(at)
            at += len(ln) + 1
        pieces: dict[int, list[Span]] = {}
        touched: set[int] = set()
        for s, e, rep in spans:
            first = bisect.bisect_right(starts, s) - 1
            last = bisect.bisect_right(starts, max(s, e - 1)) - 1
            if last > first:
                touched.update(range(first, last + 1))
            for j in range(first, last + 1):
                lo = max(s, starts[j]) - starts[j]
                hi = min(e, starts[j] + len(lines[j])) - starts[j]
                if hi > lo:
                    pieces.setdefault(j, []).append((lo, hi, rep if j == first else MASK))
        return {j: pieces.get(j, []) for j in touched}

    def _line(self, line: bytes, budget: Budget) -> bytes:
        """One line of a raw record: by value when it is JSON, else as text."""
        try:
            doc = msgspec.json.decode(line)
        except msgspec.DecodeError:
            return self._scan(line, budget) if len(line) >= self._min else line
        if isinstance(doc, str):
            s = self._string(doc, budget)
            if s is not doc:
                return msgspec.json.encode(s)
        elif isinstance(doc, (dict, list)) and self._walk(doc, budget):
            return msgspec.json.encode(doc)
        return line

    @property
    def redacts_dead_letters(self) -> bool:
        """Whether dead letters are redacted (rules on, and no
        CANONFLOW_DEADLETTER_ORIGINAL)."""
        return bool(self._rules) and not self.deadletter_original

    def dead_letter(self, letter: DeadLetter, *, redacted: bytes | None = None,
                    record: bytes | None = None) -> DeadLetter:
        """`letter` with its value redacted (`redacted`, when the caller redacted it
        with the lines around it: `redact_lines`), the original value's size and
        SHA-256, and the SHA-256 of the raw `record` it comes from (`value` when None):
        an operator finds and checks the record in its raw topic with them. `letter`
        itself when nothing matched or CANONFLOW_DEADLETTER_ORIGINAL keeps originals."""
        if not self.redacts_dead_letters:
            return letter
        value = self.redact_record(letter.value) if redacted is None else redacted
        if value == letter.value:
            return letter
        original = letter.value
        return msgspec.structs.replace(
            letter, value=value, valueBytes=len(original),
            valueSha256=hashlib.sha256(original).hexdigest(),
            recordSha256=hashlib.sha256(original if record is None else record).hexdigest(),
            reason=letter.reason + " [value redacted: valueBytes and valueSha256 are the "
                                   "original value's, recordSha256 the raw record's]")

    # -- settings ------------------------------------------------------------

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Redactor:
        """CANONFLOW_REDACT (on|off), CANONFLOW_REDACT_PATTERNS, CANONFLOW_REDACT_HOOK,
        CANONFLOW_REDACT_BUDGET, CANONFLOW_DEADLETTER_ORIGINAL.

        Raises RedactionError for an invalid pattern or setting, or a hook that cannot
        be loaded.
        """
        env = os.environ if env is None else env
        on = _flag(env, "CANONFLOW_REDACT", True)
        patterns = list(BUILTIN_PATTERNS) if on else []
        patterns += [p for p in env.get("CANONFLOW_REDACT_PATTERNS", "").splitlines() if p.strip()]
        hook_name = env.get("CANONFLOW_REDACT_HOOK", "").strip()
        raw_budget = env.get("CANONFLOW_REDACT_BUDGET", "").strip() or str(DEFAULT_BUDGET)
        try:
            budget = int(raw_budget)
        except ValueError:
            budget = 0
        if budget < 1:
            raise RedactionError(f"CANONFLOW_REDACT_BUDGET={raw_budget!r}: use a positive "
                                 "integer (work per byte of a record)")
        original = _flag(env, "CANONFLOW_DEADLETTER_ORIGINAL", False)
        if original:
            _warn_original()
        return cls(patterns, load_hook(hook_name) if hook_name else None, budget=budget,
                   deadletter_original=original)


class LetterRun:
    """Dead letters of records of one line each that follow one another (the lines of a
    file `canonflow replay` or `import` reads), redacted together as the lines of one
    record are (`Redactor.redact_lines`): a private key printed over many lines has each
    of its lines dead-lettered alone, and every one of them masked. A run ends at a
    record that is not dead-lettered, at `end()`, or past RUN_BYTES held (the last
    CONTEXT_LINES of it then stay as context for the next letters). When the redactor
    keeps dead letters as they are, each is written at once."""

    RUN_BYTES = 4 << 20
    CONTEXT_LINES = 256  # a private key's body has fewer lines

    def __init__(self, redactor: Redactor, write: Callable[[DeadLetter], None]):
        self.redactor = redactor
        self.write = write
        self._letters: list[DeadLetter] = []
        self._context: list[bytes] = []
        self._held = 0

    def add(self, letters: Sequence[DeadLetter]) -> None:
        if not self.redactor.redacts_dead_letters:
            for d in letters:
                self.write(d)
            return
        self._letters += letters
        self._held += sum(len(d.value) for d in letters)
        if self._held > self.RUN_BYTES:
            self._flush(keep=True)

    @property
    def held(self) -> bool:
        """Whether letters wait for the run to end."""
        return bool(self._letters)

    def end(self) -> None:
        """Write the letters held (the run is over)."""
        self._flush(keep=False)

    def _flush(self, keep: bool) -> None:
        if not self._letters:
            self._context = self._context if keep else []
            return
        lines = self._context + [d.value for d in self._letters]
        first = len(self._context)
        redacted = self.redactor.redact_lines(lines, range(first, len(lines)))
        for d, value in zip(self._letters, redacted[first:], strict=True):
            self.write(self.redactor.dead_letter(d, redacted=value))
        self._context = lines[-self.CONTEXT_LINES:] if keep else []
        self._letters, self._held = [], 0


class DeadLines:
    """The lines of each session's last records that had dead letters, the context of
    the next ones' redaction in the worker: a file produced one line a record that holds
    a private key makes a dead letter of each line, and only the lines before a body
    line (its BEGIN header) say it is one. A session's record without a dead letter
    ends its run. Kept in memory only (a worker that restarts starts without), at most
    CONTEXT_LINES lines and CONTEXT_BYTES a session, for the last SESSIONS sessions."""

    CONTEXT_LINES = 256
    CONTEXT_BYTES = 16 << 10  # a private key of 8,192 bits is ~6.5 KB of PEM
    SESSIONS = 1024

    def __init__(self, redactor: Redactor):
        self.redactor = redactor
        self._kept: dict[bytes, list[bytes]] = {}

    def redact(self, session: bytes, lines: Sequence[bytes], which: Iterable[int]
               ) -> list[bytes]:
        """`lines` (one record's) redacted after the session's kept lines
        (`Redactor.redact_lines`, `which` of them); they are kept in turn."""
        context = self._kept.pop(session, [])
        joined = context + list(lines)
        out = self.redactor.redact_lines(joined, [len(context) + i for i in which])
        kept, size = [], 0
        for line in reversed(joined[-self.CONTEXT_LINES:]):
            size += len(line) + 1
            if size > self.CONTEXT_BYTES:
                break
            kept.append(line)
        self._kept[session] = kept[::-1]
        if len(self._kept) > self.SESSIONS:
            del self._kept[next(iter(self._kept))]  # the least recently used
        return out[len(context):]

    def end(self, session: bytes) -> None:
        """The session's record had no dead letter: its run is over."""
        if self._kept:
            self._kept.pop(session, None)


_TRUE = ("on", "true", "1", "yes")
_FALSE = ("off", "false", "0", "no")


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value not in _TRUE + _FALSE:
        raise RedactionError(f"{name}={raw!r}: use on or off")
    return value in _TRUE


_warned = False


def _warn_original() -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning("CANONFLOW_DEADLETTER_ORIGINAL is on: dead letters keep the original "
                    "records, secrets included, for agents.deadletter's retention (30 days)")


def _mask_all(value: Any) -> Any:
    """A secret member's value with every string and number masked (nested ones too);
    null and booleans say nothing and stay. `value` itself when nothing changed."""
    if isinstance(value, str):
        return _MASK_TEXT if value and value != _MASK_TEXT else value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _MASK_TEXT
    if isinstance(value, dict):
        new = {k: _mask_all(v) for k, v in value.items()}
        return value if all(new[k] is value[k] for k in value) else new
    if isinstance(value, list):
        items = [_mask_all(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def _rename(node: dict[str, Any], renamed: list[tuple[str, str]]) -> None:
    """Rename members in place, keeping their order; a new name already taken gets a
    number (two secrets as names must not become one member)."""
    names = dict(renamed)
    items = list(node.items())
    node.clear()
    for k, v in items:
        new = names.get(k, k)
        n = 2
        base = new
        while new in node:
            new = f"{base}#{n}"
            n += 1
        node[new] = v


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
