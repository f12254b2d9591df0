"""The built-in redaction rules (on unless CANONFLOW_REDACT=off): token formats, private
key blocks, credentials in URLs, headers, command lines and `NAME=value` assignments,
and the JSON member names whose values are secrets. Each rule names where it comes
from; `pipeline.privacy.redact` applies them.
"""

from __future__ import annotations

from typing import NamedTuple

import re2

MASK = b"[REDACTED]"

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

# JSON held in text: a member whose name says secret and whose value is an array or an
# object (level 0: JSON text; level 1: JSON held in a JSON string, its quotes written \"),
# or whose name holds a JSON escape (decoded, then checked: secret_member). The group
# marks where the value starts; the redactor masks the whole value (compiled.value_end).
_MEMBER = "(?i:" + "|".join(sorted((re2.escape(w) for w in SECRET_WORDS + ("authorization",)),
                                   key=len, reverse=True)) + ")"
_WS0 = r"[ \t\r\n]*"
_WS1 = r"(?:[ \t]|\\[rnt])*"
_NAME0 = r'(?:[^"\\\r\n]|\\[^\r\n])'
_NAME1 = r'(?:[^"\\\r\n]|\\\\|\\[^"\\\r\n])'

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
    Rule("secret-json-value",
         _MEMBER + '"' + _WS0 + ":" + _WS0 + r"(?P<v1>[\[{])"
         + "|" + _MEMBER + r'\\"' + _WS1 + ":" + _WS1 + r"(?P<w1>[\[{])"
         + "|" + r'\\"(?P<m1>' + _NAME1 + r"*?\\\\u[0-9A-Fa-f]{4}" + _NAME1 + r'*?)\\"'
         + _WS1 + ":" + _WS1 + r'(?P<w2>\\"|[^ \t\r\n\\])'
         + "|" + r'"(?P<n1>' + _NAME0 + r"*?\\u[0-9A-Fa-f]{4}" + _NAME0 + r'*?)"'
         + _WS0 + ":" + _WS0 + r"(?P<v2>[^ \t\r\n])",
         "JSON members as the JSON-aware path reads them (secret_member), in text"),
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

#: Top-level fields of a canonical event that canonflow makes itself (hashes,
#: counters, enums, its clock): they cannot hold a secret and are never scanned.
ENVELOPE_FIELDS = frozenset({"type", "schemaVersion", "eventId", "seq", "provider", "createdAt",
                             "threadId", "turnId", "itemId", "requestId", "parentItemId",
                             "synthetic"})

_SUFFIX_MAX = max(map(len, SECRET_MEMBERS))


def secret_member(name: str) -> bool:
    """Whether a JSON member called `name` holds a secret (its name ends with one of
    SECRET_MEMBERS, without case)."""
    return name[-_SUFFIX_MAX - 1:].lower().endswith(SECRET_MEMBERS)
