"""Fake secrets of the formats agents print, for the redaction tests (issue 25).

Every value is made here from a fixed seed (never a real credential, and no string a
secret scanner would flag in this file): the formats are the published ones (prefix,
alphabet, length), the characters are not. `CORPUS` pairs each secret with the text
an agent's tool would print around it; `SECRET` is what must never be published.
"""

from __future__ import annotations

import base64
import random
from typing import NamedTuple

_rng = random.Random(25)
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B64 = _ALNUM + "+/"


def chars(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def pem_body(lines: int = 6) -> list[str]:
    return ["MII" + chars(61, _B64)] + [chars(64, _B64) for _ in range(lines - 1)]


class Case(NamedTuple):
    name: str
    text: str  # what the tool printed
    secrets: tuple[str, ...]  # each must be gone from everything published


def _cases() -> list[Case]:
    akia, asia = "AKIA" + chars(16, _UPPER), "ASIA" + chars(16, _UPPER)
    aws_secret, aws_session = chars(40, _B64), "IQoJb3JpZ2luX2Vj" + chars(300, _B64)
    body = pem_body()
    crlf_key = "\r\n".join(["-----BEGIN RSA PRIVATE KEY-----", *body,
                            "-----END RSA PRIVATE KEY-----"])
    cut_body = pem_body(4)
    cut_key = "\n".join(["-----BEGIN PRIVATE KEY-----", *cut_body[:3], cut_body[3][:30]])
    gcp_body = pem_body(5)
    gcp_key = "-----BEGIN PRIVATE KEY-----\\n" + "\\n".join(gcp_body) \
        + "\\n-----END PRIVATE KEY-----\\n"
    ssh_body = ["b3BlbnNzaC1rZXktdjEAAAAA" + chars(46, _B64), chars(70, _B64), chars(70, _B64)]
    jwt = ".".join([b64url(b'{"alg":"HS256","typ":"JWT"}'),
                    b64url(b'{"sub":"' + chars(12).encode() + b'","iat":1700000000}'),
                    b64url(chars(32).encode())])
    basic = base64.b64encode(f"deploy:{chars(14)}".encode()).decode()
    pw = {k: chars(n) for k, n in [("db", 18), ("mongo", 16), ("cli", 14), ("mysql", 12),
                                    ("env", 20), ("git", 22), ("num", 0)]}
    azure_key = chars(86, _B64) + "=="
    return [
        Case("aws-access-key-id", f"AWS_ACCESS_KEY_ID={akia}\nAWS_REGION=eu-west-1", (akia,)),
        Case("aws-sts-session",
             '{\n    "Credentials": {\n        "AccessKeyId": "' + asia + '",\n'
             '        "SecretAccessKey": "' + aws_secret + '",\n'
             '        "SessionToken": "' + aws_session + '",\n'
             '        "Expiration": "2026-01-01T00:00:00+00:00"\n    }\n}',
             (asia, aws_secret, aws_session)),
        Case("aws-credentials-file",
             f"[default]\naws_access_key_id = {akia}\naws_secret_access_key = {aws_secret}\n",
             (akia, aws_secret)),
        Case("gcp-service-account",
             '{\n  "type": "service_account",\n  "project_id": "demo-123",\n'
             '  "private_key_id": "' + chars(40, "0123456789abcdef") + '",\n'
             '  "private_key": "' + gcp_key + '",\n'
             '  "client_email": "ci@demo-123.iam.gserviceaccount.com"\n}',
             tuple(gcp_body)),
        Case("github-pat", "remote: token ghp_" + (g1 := chars(36)) + " accepted", ("ghp_" + g1,)),
        Case("github-oauth", "GH_TOKEN=gho_" + (g2 := chars(36)), ("gho_" + g2,)),
        Case("github-fine-grained", "using github_pat_" + (g3 := chars(22) + "_" + chars(59)),
             ("github_pat_" + g3,)),
        Case("gitlab-pat", "git clone https://oauth2:glpat-" + (g4 := chars(20))
             + "@gitlab.com/group/repo.git", ("glpat-" + g4,)),
        Case("npm-token", "//registry.npmjs.org/:_authToken=npm_" + (n1 := chars(36)),
             ("npm_" + n1,)),
        Case("pypi-token", "[pypi]\n  username = __token__\n  password = pypi-AgEIcHlwaS5vcmc"
             + (p1 := chars(70, _ALNUM + "_-")), ("pypi-AgEIcHlwaS5vcmc" + p1,)),
        Case("stripe-secret", "stripe.api_key = 'sk_live_" + (s1 := chars(24)) + "'",
             ("sk_live_" + s1,)),
        Case("stripe-restricted", "key: rk_live_" + (s2 := chars(24)) + " (restricted)",
             ("rk_live_" + s2,)),
        Case("jwt", "session cookie: " + jwt, (jwt,)),
        Case("private-key-crlf", crlf_key, tuple(body)),
        Case("private-key-cut-short", cut_key + "\n[output truncated]",
             (*cut_body[:3], cut_body[3][:30])),
        Case("openssh-private-key",
             "\n".join(["-----BEGIN OPENSSH PRIVATE KEY-----", *ssh_body,
                        "-----END OPENSSH PRIVATE KEY-----"]), tuple(ssh_body)),
        Case("postgres-url", f"DATABASE_URL=postgres://app:{pw['db']}@db.internal:5432/app",
             (pw["db"],)),
        Case("mongodb-url", f"connecting to mongodb+srv://admin:{pw['mongo']}@cluster0.mongodb.net/",
             (pw["mongo"],)),
        Case("cli-password", f"$ psql-admin --host db --password {pw['cli']} --user app",
             (pw["cli"],)),
        Case("mysql-p-quoted", f"mysql -u root -p'{pw['mysql']}' -e 'show databases'",
             (pw["mysql"],)),
        Case("env-password", f"HOME=/root\nPOSTGRES_PASSWORD={pw['env']}\nPATH=/usr/bin",
             (pw["env"],)),
        Case("basic-auth-header", f"> GET /api HTTP/1.1\n> Authorization: Basic {basic}\n",
             (basic,)),
        Case("url-userinfo", f"origin\thttps://builder:{pw['git']}@git.example.com/app.git (fetch)",
             (pw["git"],)),
        Case("azure-connection-string",
             "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=demo;"
             f"AccountKey={azure_key};EndpointSuffix=core.windows.net", (azure_key,)),
        Case("slack-bot-token", "SLACK_BOT_TOKEN: xoxb-" + (x1 := f"{chars(12, '0123456789')}-"
                                                           f"{chars(13, '0123456789')}-{chars(24)}"),
             ("xoxb-" + x1,)),
        Case("slack-user-token", "token=xoxp-" + (x2 := f"{chars(12, '0123456789')}-"
                                                 f"{chars(12, '0123456789')}-"
                                                 f"{chars(12, '0123456789')}-{chars(32)}"),
             ("xoxp-" + x2,)),
        Case("generic-token", "export TOKEN=" + (t1 := chars(32)), (t1,)),
        Case("generic-api-key", "API_KEY=" + (t2 := chars(40)) + " ./run.sh", (t2,)),
        Case("bearer-curl", "curl -H 'Authorization: Bearer " + (t3 := chars(48)) + "' https://x",
             (t3,)),
        Case("json-number-password", 'config: {"user": "app", "password": 834211009}',
             ("834211009",)),
        Case("openai-key", "OPENAI_API_KEY=sk-proj-" + (o1 := chars(48, _ALNUM + "_-")),
             ("sk-proj-" + o1,)),
        # JSON printed as text: a secret name's array or object value; a name written
        # with a JSON escape (it says secret once decoded)
        Case("json-array-password",
             'config: {"user": "app", "password": ["' + (j1 := chars(15)) + '", ' + (j2 := "7" + chars(9, "0123456789")) + "]}",
             (j1, j2)),
        Case("json-object-secret",
             '{\n  "client_secret": {\n    "value": "' + (j3 := chars(20)) + '",\n    "rotated": 3\n  }\n}',
             (j3,)),
        Case("json-escaped-name", 'creds {"pass\\u0077ord": "' + (j4 := chars(16)) + '", "user": "ci"}',
             (j4,)),
        Case("json-escaped-name-array",
             '{"db": {"API\\u005fKEY": ["' + (j5 := chars(24)) + '", {"old": "' + (j6 := chars(18)) + '"}]}}',
             (j5, j6)),
    ]


CORPUS: list[Case] = _cases()
