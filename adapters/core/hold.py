"""Held back: where a streamed delta's tail may start a secret (`hold_point`), for the
conversation core's Emitter (adapters.core.emitter), which holds such a tail back until
the stream's next delta so that the redactor sees each secret whole.

The policy is the privacy room's choice: its redactor hands `hold_point` to the core
when it redacts (pipeline.privacy.redact, Redactor.hold), and nothing here imports the
pipeline. It lives in the core, compiled with it (setup.py), because the core asks it
about every delta: the hold path was two thirds of what redaction cost the offline
replay (callgrind: 6.9k of 10.9k instructions a message), most of it this module,
interpreted (compiled: 0.40 -> 0.18 us a delta).
"""

from __future__ import annotations

import re
from typing import Final

# ---- Held back (adapters.core.emitter.Emitter): where a delta's tail may start a secret -------
#
# A secret streamed across two deltas reaches the redactor whole only if the core holds
# back the first delta's tail. `hold_point` says where such a tail begins: a key's
# format prefix running to the end (gitleaks' prefixes, as pipeline.privacy.rules), a secret
# assignment whose value runs to the end, a URL whose credentials may follow, a private
# key's BEGIN without its END, or the last word when it begins one of those. It looks
# at a bounded tail (HOLD_SCAN characters; a private key HOLD_KEY), so it costs the
# same whatever the stream's length, and most deltas end in a plain word: nothing held.
HOLD_SCAN: Final = 512
HOLD_KEY: Final = 8 * 1024
_TOKEN_PREFIXES: Final = ("sk-", "sk_live_", "sk_test_", "rk_live_", "ghp_", "gho_", "ghu_", "ghs_",
                   "ghr_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxs-", "xoxr-",
                   "AKIA", "ASIA", "AIza", "npm_", "pypi-", "eyJ", "hf_", "SG.")
_KEYWORDS: Final = ("password", "passwd", "secret", "token", "api_key", "api-key", "apikey",
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


# what the last alternative of _HOLD_TAILS matches, whole (as written: it is not
# case-blind), and the key prefixes without "-" (those with one need a "-" in the tail)
_STARTS: Final = frozenset(w[:n] for w in (*_KEYWORDS, *_TOKEN_PREFIXES, "github_pat_")
                    for n in range(1, len(w) + 1))
_PLAIN_PREFIXES: Final = tuple(p for p in _TOKEN_PREFIXES if "-" not in p)
_HOLD_TAIL: Final = re.compile("|".join(f"(?:{rx.pattern})" for rx in _HOLD_TAILS))
_PREFIX: Final = _HOLD_TAILS[0]
_ASSIGNMENT: Final = _HOLD_TAILS[1]
_FLAG: Final = _HOLD_TAILS[2]
_URL: Final = _HOLD_TAILS[3]
_START: Final = _HOLD_TAILS[4]
_BEGIN: Final = _HOLD_TAILS[5]
_KEYWORD: Final = re.compile("(?i:" + "|".join(re.escape(k) for k in (*_KEYWORDS, "pwd")) + ")")
_LOWER_KEYWORDS: Final = tuple(k.lower() for k in (*_KEYWORDS, "pwd"))
# what a key prefix's start can be, and how long a word of _STARTS can be: a start that
# is neither is tried no further (_tail_start)
_PREFIX_FIRST: Final = frozenset(p[0] for p in _TOKEN_PREFIXES)
_STARTS_MAX: Final = max(len(w) for w in _STARTS)


def _has_keyword(tail: str) -> bool:
    """Whether `tail` holds a keyword without case (_KEYWORD.search). ASCII text is lower-
    cased and searched for each: an ASCII character matches a keyword's letter without
    case exactly when its lower case is that letter (the other characters re folds to
    one, the Kelvin sign to k, a long s to s, are not ASCII); other text goes to the
    regex. Python's re tries each keyword at each position: 2.8-7.1 us a tail, where the
    searches take 0.3-0.4 us (compiled)."""
    if tail.isascii():
        low = tail.lower()
        for k in _LOWER_KEYWORDS:
            if k in low:
                return True
        return False
    return _KEYWORD.search(tail) is not None


def hold_point(text: str) -> int:
    """Where the tail of `text` that may be the start of a secret begins (len(text):
    none). Pure and deterministic: replay and the worker hold back the same. Only the
    last three words can hold one (a key, its separator, its value), so only they are
    scanned: a few microseconds whatever the delta's size, and about one for most
    deltas, which never reach the regex (`_may_start` says why that misses nothing).

    The conversation core asks twice about most deltas (the delta, then the same string
    as its stream's spooled chunk): the last answer is kept for the very same string
    object (kept alive here, so its identity cannot be reused), which halves the calls'
    cost; a pure function, so the answer is the same."""
    last = _LAST
    if text is last.text:
        return last.cut
    cut = _hold_point(text)
    last.text = text
    last.cut = cut
    return cut


class _Answer:
    """hold_point's last question and answer: the string (kept alive, so that its
    identity cannot be reused) and where its tail begins. An object's attributes, not a
    module global: compiled, a global is a dict lookup at each read and write."""

    def __init__(self) -> None:
        self.text: str | None = None
        self.cut = 0


_LAST: Final = _Answer()


def _hold_point(text: str) -> int:
    n = len(text)
    end = n - 1 if n and text[n - 1] == "\n" else n
    tail = text[n - HOLD_KEY:] if n > HOLD_KEY else text
    if not (":" in tail or "=" in tail or "-" in tail):
        # The common delta: no ":", "=" or "-" in the last HOLD_KEY characters, so no
        # private key's BEGIN, and in the window (its last HOLD_SCAN) only the last word
        # may start a tail (_may_start): what the full path below answers then, sooner.
        if end == 0 or text[end - 1].isspace():
            return n
        if not _may_start(text[max(0, n - HOLD_SCAN):end].rsplit(maxsplit=1)[-1]):
            return n
    cut = n
    key = text.rfind("-----BEGIN", max(0, n - HOLD_KEY))
    if key >= 0 and text.find("-----END", key) < 0:
        cut = key
    floor = max(0, n - HOLD_SCAN)
    window = text[floor:]
    # the regexes' "$" matches at the end and before a last "\n" (`end`): a word that
    # ends there ends where they may match
    worded = end > floor and not text[end - 1].isspace()
    if not (":" in window or "=" in window or "-" in window):
        # the tail (within the window) has none either: only its last word may hold
        if not worded or not _may_start(window.rsplit(maxsplit=1)[-1]):
            return cut
    words = window.rsplit(maxsplit=3)  # [what comes before, and] the last three
    start = floor + len(words[0]) if len(words) == 4 else floor
    tail = text[start:]
    if not (":" in tail or "=" in tail or "-" in tail) \
            and (not worded or not _may_start(words[-1])):
        return cut
    return min(cut, _tail_start(text, start, tail, words[-1] if worded else "", end))


def _tail_start(text: str, start: int, tail: str, last: str, end: int) -> int:
    """Where _HOLD_TAIL's first match from `start` begins (len(text): none), each of its
    alternatives tried only where it can match. Its search returns the leftmost start
    at which an alternative matches, so the least of each alternative's leftmost start
    is the same. An assignment needs a keyword and ":" or "=" in the tail, a URL "://",
    a command line's flag "--" or "-p", a key's BEGIN "-----"; a key prefix and the
    start of a keyword or prefix match in the last word (`_may_start`), so they are
    tried at its starts only: where it begins and after each of its non-word
    characters (anywhere else a word character comes before: their look-behind fails)."""
    best = len(text)
    colon, dash = ":" in tail, "-" in tail
    for rx, needed in ((_ASSIGNMENT, (colon or "=" in tail) and _has_keyword(tail)),
                       (_URL, colon and "://" in tail),
                       (_FLAG, dash and ("--" in tail or "-p" in tail)),
                       (_BEGIN, dash and "-----" in tail)):
        if needed:
            m = rx.search(text, start)
            if m is not None and m.start() < best:
                best = m.start()
    if last:  # the last word, ending at `end`
        first = end - len(last)
        for j in _word_starts(last):
            at = first + j
            if at >= best:
                break
            # what each needs there, before its regex says (its look-behind, its "$"),
            # from its first character (a prefix) or its length (a word of _STARTS) on
            if at < end and text[at] in _PREFIX_FIRST and text.startswith(_TOKEN_PREFIXES, at) \
                    and _PREFIX.match(text, at):
                return at
            if end - at <= _STARTS_MAX and text[at:end] in _STARTS and _START.match(text, at):
                return at
    return best


def _may_start(last: str) -> bool:
    """False only when _HOLD_TAIL cannot match in a tail without ":", "=" or "-" whose
    last word is `last` (the text not ending in whitespace, or in it and a last "\n").

    Why skipping the regex then misses nothing: every alternative but two needs a ":",
    "=" or "-" in what it matches (an assignment's separator, a URL's "://", a command
    line's "--" or "-p", a key's BEGIN dashes, a prefix such as "sk-"). The two others
    (a key's prefix and its characters to the end; the start of a keyword or of a
    prefix, whole) match no whitespace, end where the text ends and start where no
    word character comes before: so in the last word, at its start or right after one
    of its non-word characters, beginning with one of the key prefixes (those without
    "-") or being, whole, one of _STARTS. Each such start is tried; a plain word (the
    most common last word) has one."""
    if last.isalnum():  # a plain word: its only start is its first character
        return last in _STARTS or last.startswith(_PLAIN_PREFIXES)
    for j in _word_starts(last):
        rest = last[j:]
        if rest in _STARTS or rest.startswith(_PLAIN_PREFIXES):
            return True
    return False


def _word_starts(last: str) -> list[int]:
    """Where, in the last word, a tail's key prefix or keyword start may begin: at 0, and
    right after each non-word character (\\W: not str.isalnum and not "_", the test re
    makes). A plain word (alphanumeric) has only the first."""
    if last.isalnum():
        return [0]
    starts = [0]
    for j in range(len(last)):
        ch = last[j]
        if not (ch.isalnum() or ch == "_"):
            starts.append(j + 1)
    return starts
