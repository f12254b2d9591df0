"""Redaction: what must never leave the worker, removed before anything is published.

Agents print secrets: API keys in an `env` dump, a token in a curl command, a
password in a config file they read. Every canonical event passes through the
`Redactor` right before it is encoded for a topic (and in `canonflow replay`), and
so does every dead letter, so consumers never see what matched:

* built-in rules (on unless CANONFLOW_REDACT=off, `RULES`): token formats, private
  key blocks, credentials in URLs, headers, command lines and `NAME=value`
  assignments; each secret becomes "[REDACTED]";
* structured values: a JSON member whose name says secret (`"password": 123456`,
  `"client_secret": {...}`) has its value replaced, never the JSON text around it,
  so the published event always decodes;
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
import math
import os
import re
import re._constants as sre_c
import re._parser as sre_parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import msgspec
import re2

from topics.records import DeadLetter

log = logging.getLogger(__name__)

MASK = b"[REDACTED]"
_MASK_TEXT = MASK.decode()

# ---------------------------------------------------------------------------
# The rules
# ---------------------------------------------------------------------------


class Rule(NamedTuple):
    """One built-in rule. Named groups mark what to mask (the whole match when none
    takes part): `s...` is replaced by [REDACTED]; `q...` by "[REDACTED]" and `e...`
    by \\"[REDACTED]\\", for an unquoted value after a quoted name, so JSON held in a
    string stays JSON."""

    name: str
    pattern: str  # RE2 syntax, also valid for Python's re (the tests generate matches)
    source: str  # where the format comes from


#: Names that say "the value is a secret" when a name ends with them: in `NAME=value`
#: text and as JSON member names. A name must END with one (`apiKeySource`,
#: `passwords_count`, `inputTokens` are not secrets; `DB_PASSWORD`, `client_secret`,
#: `SessionToken` are). Not `pwd` (the working directory) nor `credentials` (fetch's
#: `credentials: "include"`).
_KEY_STEMS = ("api", "access", "secret", "private", "account", "master", "signing",
              "encryption", "client", "app", "auth", "license")
SECRET_WORDS: tuple[str, ...] = (
    "password", "passwd", "passphrase", "secret", "token", "auth",
    *(stem + sep + "key" for stem in _KEY_STEMS for sep in ("", "_", "-")),
)
#: Member names whose whole value is a secret, besides SECRET_WORDS (in text, an
#: `Authorization:` header has its own rule: the scheme stays, the credential goes).
SECRET_MEMBERS: tuple[str, ...] = (*SECRET_WORDS, "authorization")

_WORD = "(?i:" + "|".join(sorted((re2.escape(w) for w in SECRET_WORDS), key=len,
                                 reverse=True)) + ")"
# A value: quoted (JSON escapes allowed), escaped-quoted (JSON held in a JSON string),
# single-quoted, or a bare token that stops at whitespace, quotes, separators and
# shell syntax; a backslash is part of it unless it starts an escape (\n, \", ...).
_UNQ_CHAR = r"""(?:[^ \t\r\n"'`,;&|<>(){}\[\]\\]|\\[^nrt"'\\ ])"""
_UNQ = r"""[^ \t\r\n"'`,;&|<>(){}\[\]\\=]""" + _UNQ_CHAR + "*"
_DQ = r'"(?P<{0}>(?:[^"\\\r\n]|\\[^\r\n])+)"'
_EQ = r'\\"(?P<{0}>(?:[^"\\\r\n]|\\[^"\r\n])+)\\"'
_SQ = r"'(?P<{0}>[^'\r\n]+)'"

# A private key's base64 body: runs of base64 separated by whitespace or by escaped
# line ends (`\n` as two characters: a key inside a JSON string or a .env file).
_PEM_HEAD = r"-----BEGIN[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_FOOT = r"-----END[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_SEP = r"(?:[ \t\r\n]|\\{1,2}[rn])"
_PEM_NL = r"[ \t]*(?:[\r\n]|\\{1,2}[rn])"
_PEM_LINE = r"(?:[A-Za-z0-9+/=]+|(?:Proc-Type|DEK-Info|Comment):[^\r\n\\]*)"
_PEM_BODY = f"(?:{_PEM_SEP}+{_PEM_LINE})"

RULES: tuple[Rule, ...] = (
    # A whole block; or one cut short (no END line): the header and every line after
    # it, when the first is a whole line or 24+ characters of base64. A header alone
    # (grep output, prose after it on its line) is not a secret. No capture groups: RE2 then needs no submatch
    # pass over a long match (110 us a key with them, ~2 without).
    Rule("private-key",
         f"{_PEM_HEAD}(?:{_PEM_BODY}*{_PEM_SEP}*{_PEM_FOOT}"
         f"|{_PEM_NL}{_PEM_SEP}*(?:[A-Za-z0-9+/=]{{24,}}|{_PEM_LINE}{_PEM_NL}{_PEM_SEP}*{_PEM_LINE})"
         f"{_PEM_BODY}*)",
         "gitleaks private-key (header, body, footer re-expressed as a line grammar)"),
    Rule("aws-access-key-id", r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}",
         "gitleaks aws-access-token"),
    Rule("github-token", r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}",
         "gitleaks github-pat, github-oauth, github-app-token, github-refresh-token, "
         "github-fine-grained-pat"),
    Rule("gitlab-token",
         r"gl(?:pat|dt|rt|ptt|ft|imt|agent|oas|soat|ffct|cbt)-[A-Za-z0-9_.-]{20,}"
         r"|GR1348941[A-Za-z0-9_-]{20,}",
         "gitleaks gitlab-pat, gitlab-pat-routable, gitlab-deploy-token, gitlab-rrt and "
         "the other gitlab-* token rules"),
    Rule("npm-token", r"npm_[A-Za-z0-9]{36,}", "gitleaks npm-access-token"),
    Rule("pypi-token", r"pypi-AgE[A-Za-z0-9_-]{50,}",
         "gitleaks pypi-upload-token (pypi.org and test.pypi.org macaroons)"),
    Rule("stripe-key", r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{24,}",
         "gitleaks stripe-access-token; detect-secrets StripeDetector"),
    Rule("openai-anthropic-key", r"\bsk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
         "gitleaks openai-api-key, anthropic-api-key (any sk- key of 20+ characters)"),
    Rule("slack-token",
         r"xox[abposre]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,}"
         r"|hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{20,}",
         "gitleaks slack-bot-token, slack-user-token, slack-app-token, slack-webhook-url; "
         "detect-secrets SlackDetector"),
    Rule("google-key", r"AIza[0-9A-Za-z_-]{35}|GOCSPX-[A-Za-z0-9_-]{20,}|ya29\.[A-Za-z0-9_-]{20,}",
         "gitleaks gcp-api-key; Google OAuth client secrets and access tokens"),
    Rule("jwt", r"\bey[A-Za-z0-9_-]{8,}\.ey[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
         "gitleaks jwt; detect-secrets JwtTokenDetector"),
    Rule("vendor-token",
         r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}|hf_[A-Za-z]{34,}"
         r"|do[opr]_v1_[a-f0-9]{64}|dapi[a-f0-9]{32}|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"
         r"|hv[sb]\.[A-Za-z0-9_-]{24,}|AGE-SECRET-KEY-1[0-9A-Z]{58}|HRKU-AA[0-9a-zA-Z_-]{58}"
         r"|dp\.(?:pt|st|sa|ct)\.[A-Za-z0-9]{40,}|[a-zA-Z0-9_~.]{3}[0-9]Q~[a-zA-Z0-9_~.-]{31,34}",
         "gitleaks sendgrid-api-token, huggingface-access-token, digitalocean-*, "
         "databricks-api-token, shopify-*, vault-service-token, age-secret-key, "
         "heroku-api-key-v2, doppler-api-token, azure-ad-client-secret"),
    # scheme://user:password@host: the password (database URLs, git remotes, proxies)
    Rule("url-password", r"://[^ \t\r\n:/?#@\"'<>\\]*:(?P<s>[^ \t\r\n/?#@\"'<>\\]+)@",
         "detect-secrets BasicAuthDetector"),
    Rule("azure-sas-signature", r"[?&]sig=(?P<s>[A-Za-z0-9%+/=]{16,})",
         "Azure shared access signatures (AccountKey= is a secret assignment)"),
    # Authorization: Basic/Bearer/token <credential>; a bearer token anywhere
    Rule("auth-header",
         r"(?i:(?:proxy-)?authorization)\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?"
         r"(?i:(?:basic|bearer|token|bot|digest|sso-key|apikey)[ \t]+)?"
         r"(?P<s1>[A-Za-z0-9+/=._~:-]{6,})"
         r"|(?i:bearer)[ \t]+(?P<s2>[A-Za-z0-9._~+/=-]{16,})",
         "gitleaks curl-auth-header; detect-secrets KeywordDetector"),
    # NAME=value, NAME: value, "name": value, name := value (env, shell, YAML, JSON held
    # in text, config files, query strings); JSON's "password": 123456 keeps its JSON
    Rule("secret-assignment",
         _WORD + r"(?:\\[\"'][ \t]*[:=][ \t]*(?:" + _EQ.format("s1") + "|" + _DQ.format("s2")
         + "|" + _SQ.format("s3") + f"|(?P<e1>{_UNQ}))"
         + r"|[\"'][ \t]*[:=][ \t]*(?:" + _DQ.format("s4") + "|" + _EQ.format("s5")
         + "|" + _SQ.format("s6") + f"|(?P<q1>{_UNQ}))"
         + r"|[ \t]*(?::=|=>|\?=|=)[ \t]*(?:" + _DQ.format("s7") + "|" + _EQ.format("s8")
         + "|" + _SQ.format("s9") + f"|(?P<s10>{_UNQ}))"
         + r"|:[ \t]+(?:" + _DQ.format("s11") + "|" + _SQ.format("s12")
         + f"|(?P<s13>{_UNQ_CHAR}{{4,}})))",
         "gitleaks generic-api-key, hashicorp-tf-password; detect-secrets KeywordDetector, "
         "AzureStorageKeyDetector (names must end with the keyword)"),
    # --password x, --api-key "x", -storepass x, -p'x', mysql -pSECRET, sshpass -p x
    Rule("cli-password",
         r"--[A-Za-z0-9_-]*" + _WORD
         + r"[ \t]+(?:\"(?P<s1>[^\"\r\n]+)\"|'(?P<s2>[^'\r\n]+)'"
           r"|(?P<s3>[^ \t\r\n\"'|&;<>-][^ \t\r\n\"'|&;<>]*))"
         r"|(?:^|[ \t\r\n])-(?:storepass|keypass|srcstorepass|deststorepass)[ \t]+(?P<s4>[^ \t\r\n]+)"
         r"|(?:^|[ \t\r\n])-p(?:'(?P<s5>[^'\r\n]+)'|\"(?P<s6>[^\"\r\n]+)\")"
         r"|\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\r\n]*?[ \t]-p(?P<s7>[^ \t\r\n'\"][^ \t\r\n]*)"
         r"|\bsshpass[ \t]+-p[ \t]*(?P<s8>[^ \t\r\n]+)",
         "gitleaks curl-auth-user; detect-secrets KeywordDetector (command-line forms)"),
)
BUILTIN_PATTERNS: tuple[str, ...] = tuple(r.pattern for r in RULES)
_ASSIGNMENT = next(r.pattern for r in RULES if r.name == "secret-assignment")

#: Top-level fields of a canonical event that canonflow makes itself (hashes,
#: counters, enums, its clock): they cannot hold a secret and are never scanned.
ENVELOPE_FIELDS = frozenset({"type", "schemaVersion", "eventId", "seq", "provider", "createdAt",
                             "threadId", "turnId", "itemId", "requestId", "parentItemId",
                             "synthetic"})

#: Work units (one per byte a pattern scans, _MATCH_COST per match) a record may
#: spend, per byte of the record, and at least _BUDGET_FLOOR. Measured here: RE2 scans
#: about 600 MB/s (~1.7 ns a unit) and a match with its groups costs up to ~10 us, so
#: 64 units a byte bound redaction to ~0.1 CPU-s per MB of record, whatever it holds.
DEFAULT_BUDGET = 64
_BUDGET_FLOOR = 1 << 20
_MATCH_COST = 8192
_SUFFIX_MAX = max(map(len, SECRET_MEMBERS))


class RedactionError(ValueError):
    """The redaction settings are invalid (a bad pattern, a hook that cannot be loaded)."""


# ---------------------------------------------------------------------------
# The literal prefilter: strings every match of a pattern contains
# ---------------------------------------------------------------------------

_SET_CAP = 1024  # the most strings a literal set keeps before it gives up
_CLASS_CAP = 16  # the most characters a class may have to count as a literal


class _Lit(NamedTuple):
    """What every match of a piece of pattern looks like, lower-cased (the prefilter
    matches without case): `exact` the finite set of its matches (None: too many);
    every non-empty match starts with one of `pre` and ends with one of `suf` ("" in
    them: nothing known); `must` holds a string every match contains (None: no
    guarantee); `nullable`: it can match the empty string."""

    exact: frozenset[str] | None
    pre: frozenset[str]
    suf: frozenset[str]
    must: frozenset[str] | None
    nullable: bool


_UNKNOWN = frozenset({""})
_ANY = _Lit(None, _UNKNOWN, _UNKNOWN, None, False)
_EMPTY = _Lit(frozenset({""}), _UNKNOWN, _UNKNOWN, None, True)


def _product(a: Iterable[str], b: Iterable[str]) -> frozenset[str] | None:
    out = frozenset(x + y for x in a for y in b)
    return out if len(out) <= _SET_CAP else None


def _known(s: frozenset[str] | None) -> frozenset[str]:
    return s if s and "" not in s and len(s) <= _SET_CAP else _UNKNOWN


def _union(a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
    return _UNKNOWN if "" in a or "" in b else _known(a | b)


def _better(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    """The more selective of two guarantees."""
    def score(s: frozenset[str] | None) -> float:
        # a character more is ~5 bits rarer; twice the strings, 1 bit more common
        return -1.0 if not s or "" in s else 5 * min(map(len, s)) - math.log2(len(s))
    return a if score(a) >= score(b) else b


def _pre(a: _Lit, b: _Lit) -> frozenset[str]:
    """What every non-empty match of a then b starts with."""
    if a.exact is None:
        return _union(a.pre, b.pre) if a.nullable else a.pre
    out: set[str] = set()
    for x in a.exact:
        if x:  # x itself is a prefix; x and b's start, when b cannot be empty
            out |= {x + p for p in b.pre} if "" not in b.pre and not b.nullable else {x}
        elif "" in b.pre:
            return _UNKNOWN
        else:
            out |= b.pre
    return _known(frozenset(out))


def _suf(a: _Lit, b: _Lit) -> frozenset[str]:
    """What every non-empty match of a then b ends with."""
    if b.exact is None:
        return _union(a.suf, b.suf) if b.nullable else b.suf
    out: set[str] = set()
    for y in b.exact:
        if y:
            out |= {s + y for s in a.suf} if "" not in a.suf and not a.nullable else {y}
        elif "" in a.suf:
            return _UNKNOWN
        else:
            out |= a.suf
    return _known(frozenset(out))


def _seq(items: list[_Lit]) -> _Lit:
    acc = _EMPTY
    for it in items:
        exact = _product(acc.exact, it.exact) \
            if acc.exact is not None and it.exact is not None else None
        pre = _pre(acc, it)
        suf = _suf(acc, it)
        must = _better(acc.must, it.must)
        if not acc.nullable and not it.nullable:
            must = _better(must, _product(acc.suf, it.pre))
        acc = _Lit(exact, pre, suf, _better(must, exact if exact and "" not in exact else None),
                   acc.nullable and it.nullable)
    return acc


def _node(op: Any, av: Any) -> _Lit:
    if op is sre_c.LITERAL:
        c = frozenset({chr(av).lower()})
        return _Lit(c, c, c, c, False)
    if op is sre_c.AT:
        return _EMPTY
    if op is sre_c.IN:
        chars: set[str] = set()
        for kind, value in av:
            if kind is sre_c.LITERAL:
                chars.add(chr(value).lower())
            elif kind is sre_c.RANGE and value[1] - value[0] < _CLASS_CAP:
                chars.update(chr(c).lower() for c in range(value[0], value[1] + 1))
            else:
                return _ANY
        if not chars or len(chars) > _CLASS_CAP:
            return _ANY
        s = frozenset(chars)
        return _Lit(s, s, s, s, False)
    if op is sre_c.SUBPATTERN:
        return _seq([_node(o, a) for o, a in av[3]])
    if op is sre_c.BRANCH:
        alts = [_seq([_node(o, a) for o, a in alt]) for alt in av[1]]
        exact = None if any(a.exact is None for a in alts) else \
            frozenset().union(*(a.exact for a in alts if a.exact is not None))
        if exact is not None and len(exact) > _SET_CAP:
            exact = None
        pre = suf = frozenset()
        for a in alts:
            pre, suf = _union(pre, a.pre), _union(suf, a.suf)
        musts = [a.must for a in alts]
        must = None if any(m is None or "" in m for m in musts) else \
            frozenset().union(*(m for m in musts if m is not None))
        nullable = any(a.nullable for a in alts)
        return _Lit(exact, pre, suf, None if nullable else must, nullable)
    if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
        lo, hi, sub = av
        inner = _seq([_node(o, a) for o, a in sub])
        if lo == 0:
            return _Lit(None, inner.pre, inner.suf, None, True)
        exact = inner.exact if lo == hi == 1 else None
        return _Lit(exact, inner.pre, inner.suf, inner.must, inner.nullable)
    return _ANY


def required_literals(pattern: str) -> frozenset[str] | None:
    """Lower-case strings one of which every match of `pattern` contains (matched
    without case); None when no such set can be shown (the pattern then runs on every
    event). Read from Python's parse of the pattern, which for the RE2 syntax used here
    has the same literal structure (a property test checks it on generated matches)."""
    try:
        parsed = sre_parse.parse(pattern.replace(r"\z", r"\Z"))
    except (re2.error, sre_c.error, ValueError, OverflowError, RecursionError):
        return None
    must = _seq([_node(op, av) for op, av in parsed]).must
    if not must or "" in must:
        return None
    # a string containing another one adds nothing
    return frozenset(m for m in must if not any(o != m and o in m for o in must))


def json_literals(literals: Iterable[str]) -> frozenset[str]:
    """The same literals as they show in the JSON text of a string holding them
    (msgspec's escapes: quote, backslash, control characters)."""
    return frozenset(msgspec.json.encode(x).decode()[1:-1] for x in literals)


def min_width(pattern: str) -> int:
    """The fewest characters (so bytes) a match of `pattern` spans; 0 when unknown."""
    try:
        return int(sre_parse.parse(pattern.replace(r"\z", r"\Z")).getwidth()[0])
    except (re2.error, sre_c.error, ValueError, OverflowError, RecursionError):
        return 0


def secret_member(name: str) -> bool:
    """Whether a JSON member called `name` holds a secret (its name ends with one of
    SECRET_MEMBERS, without case)."""
    return name[-_SUFFIX_MAX - 1:].lower().endswith(SECRET_MEMBERS)


# ---------------------------------------------------------------------------
# Masking
# ---------------------------------------------------------------------------

_REPLACEMENT = {"s": MASK, "q": b'"' + MASK + b'"', "e": b'\\"' + MASK + b'\\"'}

Span = tuple[int, int, bytes]


def spans_of(rx: Any, names: dict[int, bytes], text: bytes) -> list[Span]:
    """What each match of `rx` in `text` masks: its named groups that took part, else
    the whole match (reference and fast path alike)."""
    out: list[Span] = []
    for m in rx.finditer(text):
        out += _match_spans(m, names)
    return out


def _match_spans(m: Any, names: dict[int, bytes]) -> list[Span]:
    got = [(m.start(i), m.end(i), rep) for i, rep in names.items() if m.start(i) >= 0]
    return got or [(m.start(), m.end(), MASK)]


def mask(text: bytes, spans: list[Span]) -> bytes:
    """`text` with each span replaced; overlapping spans merge (the first one's
    replacement stands for the merged stretch)."""
    out, last = [], 0
    for start, end, rep in sorted(spans):
        if end <= last:
            continue
        if start < last:  # overlaps the stretch already masked: extend it
            out.append(b"")
        else:
            out += [text[last:start], rep]
        last = end
    out.append(text[last:])
    return b"".join(out)


def _group_names(rx: Any) -> dict[int, bytes]:
    names = {(n.decode() if isinstance(n, bytes) else n): i for n, i in rx.groupindex.items()}
    return {i: _REPLACEMENT[n[0]] for n, i in sorted(names.items(), key=lambda x: x[1])
            if n[:1] in _REPLACEMENT}


def _options(max_mem: int = 64 << 20, never_capture: bool = False) -> Any:
    opts = re2.Options()
    opts.max_mem = max_mem  # room for the DFA: a DFA out of memory would fall back to NFA
    opts.never_capture = never_capture
    return opts


def _compile(pattern: str, **options: Any) -> Any:
    try:
        return re2.compile(pattern.encode(), _options(**options))
    except re2.error as e:
        raise RedactionError(f"invalid redaction pattern {pattern!r} (RE2 syntax: no "
                             f"look-around or back-references): {e}") from None


def _alternation(literals: Iterable[str], *patterns: str) -> str:
    return "(?i:" + "|".join([re2.escape(x) for x in sorted(literals)] + list(patterns)) + ")"


_UNANCHORED = re2._Anchor.UNANCHORED


def _finder(rx: Any) -> Callable[..., tuple[int, int] | None]:
    """`find(data, pos=0)`: the span of `rx`'s first match in `data` from `pos`, or
    None. Calls google-re2's compiled RE2 (version pinned) without the wrapper's
    generator, ~1 us a call less: this runs on every event."""
    match = rx._regexp.Match

    def find(data: bytes, pos: int = 0) -> tuple[int, int] | None:
        span = match(_UNANCHORED, data, pos, len(data))[0]
        return None if span[0] < 0 else span

    return find


def _never(data: bytes, pos: int = 0) -> None:
    return None


class _Budget:
    """Work a record may still spend (deterministic: bytes scanned and matches, never
    the clock, so the same record always publishes the same bytes)."""

    __slots__ = ("left", "spent")

    def __init__(self, size: int, per_byte: int):
        self.left = max(_BUDGET_FLOOR, per_byte * size)
        self.spent = 0

    def spend(self, units: int) -> bool:
        """False once the budget is gone."""
        self.spent += units
        self.left -= units
        return self.left >= 0

    def scanned(self, units: int) -> None:
        """Work that is always done (one pass of the combined rules): counted, not
        limited."""
        self.spent += units


class _Pattern:
    __slots__ = ("pattern", "rx", "names", "literals")

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.rx = _compile(pattern, max_mem=8 << 20)
        self.names = _group_names(self.rx)
        self.literals = required_literals(pattern)


# ---------------------------------------------------------------------------
# The Redactor
# ---------------------------------------------------------------------------


# ---- Held back (adapters.base.Emitter): where a delta's tail may start a secret -------
#
# A secret streamed across two deltas reaches the redactor whole only if the core holds
# back the first delta's tail. `hold_point` says where such a tail begins: a key's
# format prefix running to the end (gitleaks' prefixes, as the rules above), a secret
# assignment whose value runs to the end, a URL whose credentials may follow, a private
# key's BEGIN without its END, or the last word when it begins one of those. It looks
# at a bounded tail (HOLD_SCAN characters; a private key HOLD_KEY), so it costs the
# same whatever the stream's length, and most deltas end in a plain word: nothing held.
HOLD_SCAN = 512
HOLD_KEY = 8 * 1024
_TOKEN_PREFIXES = ("sk-", "sk_live_", "sk_test_", "rk_live_", "ghp_", "gho_", "ghu_", "ghs_",
                   "ghr_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxs-", "xoxr-",
                   "AKIA", "ASIA", "AIza", "npm_", "pypi-", "eyJ", "hf_", "SG.")
_KEYWORDS = ("password", "passwd", "secret", "token", "api_key", "api-key", "apikey",
             "access_key", "private_key", "authorization", "accountkey", "credential")
_HOLD_TAILS = [re.compile(p) for p in (
    # a key by its prefix, its characters running to the end
    r"(?<![\w])(?:" + "|".join(re.escape(t) for t in _TOKEN_PREFIXES) + r")[\w\-.=+/]*$",
    # `password: x`, `TOKEN=x`, `"api_key": "x`, `Authorization: Bearer x`: value to the end
    r"(?i:(?:" + "|".join(re.escape(k) for k in _KEYWORDS)
    + r"|pwd)\w*[\"']?\s*[:=]\s*(?:(?:bearer|basic|token)\s+)?[\"']?[^\s\"']*)$",
    # --password x, --token=x, -p'x'
    r"(?:--(?:password|passwd|token|secret|api-key)(?:[= ]\s*)?\S*|(?<!\S)-p['\"]?\S*)$",
    # scheme://user:password@ (the part before @ may be credentials)
    r"[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/@]*$",
    # the last word when it may be the beginning of a keyword or of a key's prefix (a
    # delta may end one character into "ghp_..."): it waits for the next delta
    r"(?<![\w])(?:"
    + "|".join(sorted({re.escape(w[:n]) for w in (*_KEYWORDS, *_TOKEN_PREFIXES, "github_pat_")
                       for n in range(1, len(w) + 1)}, key=len, reverse=True))
    + r")$",
    r"-{5}(?:B(?:E(?:G(?:I(?:N)?)?)?)?)?$",  # the start of a private key's BEGIN
)]


# the starts of the keywords and of the lowercase key prefixes, and of the key prefixes
# that are cased (AKIA, eyJ): a last word that is one may become one
_WORD_STARTS = tuple(sorted({w[:n].lower() for w in (*_KEYWORDS, *_TOKEN_PREFIXES, "pwd")
                             for n in range(1, len(w) + 1)}))
_CASED_STARTS = tuple(sorted({w[:n] for w in _TOKEN_PREFIXES if w != w.lower()
                              for n in range(1, len(w) + 1)}))
_HOLD_TAIL = re.compile("|".join(f"(?:{rx.pattern})" for rx in _HOLD_TAILS))


def hold_point(text: str) -> int:
    """Where the tail of `text` that may be the start of a secret begins (len(text):
    none). Pure and deterministic: replay and the worker hold back the same. Only the
    last three words can hold one (a key, its separator, its value), so only they are
    scanned: a few microseconds whatever the delta's size."""
    n = len(text)
    cut = n
    key = text.rfind("-----BEGIN", max(0, n - HOLD_KEY))
    if key >= 0 and text.find("-----END", key) < 0:
        cut = key
    floor = max(0, n - HOLD_SCAN)
    words = text[floor:].rsplit(maxsplit=3)  # [what comes before, and] the last three
    start = floor + len(words[0]) if len(words) == 4 else floor
    tail = text[start:]
    # most deltas end in a plain word: no separator a secret assignment needs, and no
    # last word that begins a key's prefix or a keyword (C string methods, no regex)
    if not (":" in tail or "=" in tail or "-" in tail
            or tail[tail.rfind(" ") + 1:].lstrip("\"'(`").lower().startswith(_WORD_STARTS)
            or tail[tail.rfind(" ") + 1:].lstrip("\"'(`").startswith(_CASED_STARTS)):
        return cut
    m = _HOLD_TAIL.search(text, start)
    if m is not None and m.start() < cut:
        cut = m.start()
    return cut


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
        self._rules = [_Pattern(p) for p in self.patterns]
        self.budget_exceeded = 0  # records that ran out of budget (fail closed)
        self.work = 0  # work units spent so far (bytes scanned, matches): tests count it
        literals: set[str] = set()
        self._always = False  # a pattern without a provable literal: scan every event
        for rule in self._rules:
            if rule.literals is None:
                self._always = True
            else:
                literals |= rule.literals
        self._min = min((min_width(p) for p in self.patterns), default=0)
        # all patterns built in: see _strings
        self._joined = all(p in BUILTIN_PATTERNS for p in self.patterns)
        self._json_prefilter = self._text_prefilter = self._detector = _never
        self._set = None
        if self._rules:
            members = SECRET_MEMBERS if self.members else ()
            # Raw text (dead letters) holds the literals as they are; a JSON member
            # named like a secret there may have a space before its colon.
            self._text_prefilter = _finder(_compile(_alternation(literals | set(members)),
                                                    max_mem=8 << 20))
            # Encoded events hold them JSON-escaped, and a secret member's name right
            # before `":`. Another encoder than msgspec may write a printable character,
            # a tab or a line end as \u00XX, K (Kelvin) and long s (k and s without case)
            # as \u212a / \u017f, "/" as "\/", or a space before a member's colon: such
            # text goes the slow way.
            self._json_prefilter = _finder(_compile(_alternation(
                json_literals(literals) | {m + '":' for m in members},
                r"\\(?:/|u(?:[^0]|0[^0]|00[^01]|000[9adAD]))", r'"[ \t\r\n]+:'),
                max_mem=8 << 20))
            self._detector = _finder(_compile("|".join(f"(?:{p})" for p in self.patterns),
                                              never_capture=True))
            self._set = re2.Set.SearchSet(_options())
            for p in self.patterns:
                self._set.Add(p.encode())
            self._set.Compile()

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
        """The event to publish (JSON bytes): `encoded` itself when nothing matched.

        Values are redacted, never the JSON text around them: the result decodes
        whenever `encoded` did. Bytes that are not JSON are redacted as text."""
        if self._rules and (self._always or self._json_prefilter(encoded) is not None):
            try:
                doc = msgspec.json.decode(encoded)
            except msgspec.DecodeError:
                encoded = self.redact_text(encoded)
            else:
                budget = _Budget(len(encoded), self.budget)
                if self._walk(doc, budget, envelope=True):
                    encoded = msgspec.json.encode(doc)
                self._done(len(encoded), budget)
        if self.hook is not None:
            result = self.hook(json.loads(encoded))
            if result is not None:
                encoded = json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode()
        return encoded

    def _walk(self, doc: Any, budget: _Budget, *, envelope: bool = False) -> bool:
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

    def _strings(self, texts: list[str], budget: _Budget
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
                new = self._scan(datas[i], budget)
                if new is not datas[i]:
                    yield i, new.decode("utf-8", "surrogatepass")
            # on from the newline after it: a match may start there ([ \t\r\n]-p'...)
            done, pos = last, starts[last] + len(datas[last])

    def _string(self, s: str, budget: _Budget) -> str:
        if len(s) < self._min:
            return s
        data = s.encode("utf-8", "surrogatepass")
        new = self._scan(data, budget)
        return s if new is data else new.decode("utf-8", "surrogatepass")

    def _scan(self, data: bytes, budget: _Budget) -> bytes:
        """One string's bytes, redacted: one pass of every rule at once; the rules that
        matched run again for their spans. Past the budget, a string with a match is
        masked whole."""
        assert self._set is not None
        budget.scanned(len(data))
        if self._detector(data) is None:
            return data
        if budget.left < 0 or not budget.spend(len(data)):
            return MASK
        hits = self._set.Match(data) or range(len(self._rules))  # None: DFA gave up
        spans: list[Span] = []
        for i in hits:
            rule = self._rules[i]
            if not budget.spend(len(data)):
                return MASK
            for m in rule.rx.finditer(data):
                if not budget.spend(_MATCH_COST):
                    spans.append((m.start(), len(data), MASK))  # fail closed from here
                    return mask(data, spans)
                spans += _match_spans(m, rule.names)
        return mask(data, spans) if spans else data

    def _done(self, size: int, budget: _Budget) -> None:
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
        budget = _Budget(len(data), self.budget)
        out = self._scan(data, budget) if len(data) >= self._min else data
        self._done(len(data), budget)
        return out

    def redact_record(self, data: bytes) -> bytes:
        """A raw record (NDJSON, or bytes that are not even UTF-8), redacted: each line
        that is JSON by value (as events are), any other as text. `data` itself when
        nothing matched."""
        if not self._rules or not (self._always or self._text_prefilter(data) is not None):
            return data
        budget = _Budget(len(data), self.budget)
        lines = data.split(b"\n")
        changed = False
        for i, line in enumerate(lines):
            if self._text_prefilter(line) is None and not self._always:
                continue
            new = line
            try:
                doc = msgspec.json.decode(line)
            except msgspec.DecodeError:
                if len(line) >= self._min:
                    new = self._scan(line, budget)
            else:
                if isinstance(doc, str):
                    s = self._string(doc, budget)
                    if s is not doc:
                        new = msgspec.json.encode(s)
                elif isinstance(doc, (dict, list)) and self._walk(doc, budget):
                    new = msgspec.json.encode(doc)
            if new is not line:
                lines[i] = new
                changed = True
        self._done(len(data), budget)
        return b"\n".join(lines) if changed else data

    def dead_letter(self, letter: DeadLetter) -> DeadLetter:
        """`letter` with its value redacted, and the original's size and SHA-256 (so
        an operator can find and check the record in its raw topic); `letter` itself
        when nothing matched or CANONFLOW_DEADLETTER_ORIGINAL keeps originals."""
        if self.deadletter_original or not self._rules:
            return letter
        value = self.redact_record(letter.value)
        if value is letter.value:
            return letter
        return msgspec.structs.replace(
            letter, value=value, valueBytes=len(letter.value),
            valueSha256=hashlib.sha256(letter.value).hexdigest(),
            reason=letter.reason + " [value redacted: valueBytes and valueSha256 are the "
                                   "original record's]")

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
