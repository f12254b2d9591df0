"""The generated parts of the documentation site (an MkDocs hook, see mkdocs.yml).

Three references are written from the code at every build, so they cannot drift:

- the configuration reference, from `pipeline/settings.py`: every field of `Settings`,
  its `CANONFLOW_*` variable, type, default and the `#:` comment above it;
- the event contract reference, from `topics/canonflow.schema.json` (generated from the
  msgspec types, their fields' descriptions included) and the docstrings of those types, with an example
  value taken from the reviewed goldens (`tests/adapters/goldens/*/*.out.jsonl`);
- one page per runtime of `topics/runtimes.py`, from its adapter's module docstring;
- the alert rules, from `deploy/prometheus/alerts.yml`.

A page asks for a reference with a marker line (`<!-- canonflow:settings -->`,
`<!-- canonflow:contract -->`, `<!-- canonflow:runtimes -->`, `<!-- canonflow:alerts -->`). The module reads the
source with `ast` and imports nothing of canonflow, so the site builds without the
project's runtime dependencies. `python docs/hooks/canonflow_docs.py settings|contract`
prints a reference.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "pipeline" / "settings.py"
SCHEMA = ROOT / "topics" / "canonflow.schema.json"
RUNTIMES = ROOT / "topics" / "runtimes.py"
GOLDENS = ROOT / "tests" / "adapters" / "goldens"
CONTRACT_SOURCES = [ROOT / "topics" / n for n in (
    "canonical.py", "chat.py", "records.py", "sessions.py", "metrics.py", "usage.py")] + \
    sorted((ROOT / "topics" / "payloads").glob("*.py"))


# ---- reading the source -------------------------------------------------------------


def _comment_above(lines: list[str], lineno: int) -> str:
    """The `#:` comment block right above line `lineno` (1-based), joined."""
    out: list[str] = []
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith("#:"):
        out.insert(0, lines[i].strip()[2:].strip())
        i -= 1
    return " ".join(out)


class _Class:
    def __init__(self, name: str, bases: list[str], doc: str,
                 fields: dict[str, tuple[str, str | None, str]]):
        self.name, self.bases, self.doc, self.fields = name, bases, doc, fields


def _classes(path: Path) -> dict[str, _Class]:
    """Every class of `path`: its bases, docstring and annotated fields
    (name -> (annotation, default or None, `#:` comment))."""
    source = path.read_text()
    lines = source.splitlines()
    out: dict[str, _Class] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields: dict[str, tuple[str, str | None, str]] = {}
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                default = ast.unparse(stmt.value) if stmt.value is not None else None
                fields[stmt.target.id] = (ast.unparse(stmt.annotation), default,
                                          _comment_above(lines, stmt.lineno))
                # a field renamed on the wire (msgspec.field(name=...)) answers to both
                if isinstance(stmt.value, ast.Call):
                    for kw in stmt.value.keywords:
                        if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                            fields[kw.value.value] = fields[stmt.target.id]
        out[node.name] = _Class(node.name, [ast.unparse(b) for b in node.bases],
                                ast.get_docstring(node) or "", fields)
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# ---- the configuration reference ----------------------------------------------------


def _default(default: str | None) -> str:
    """A default as a reader wants it: arithmetic worked out, a catalog constant read."""
    if default is None:
        return "-"
    if default == "PROVIDERS":
        return "every registered provider"
    if default.isidentifier() and default not in ("None", "True", "False"):
        catalog = ast.parse((ROOT / "topics" / "catalog.py").read_text())
        for node in catalog.body:
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(getattr(t, "id", "") == default for t in targets) and node.value:
                    return f"`{ast.literal_eval(node.value)!r}`"
        return f"`{default}`"
    tree = ast.parse(default, mode="eval")
    if all(isinstance(n, ast.expr | ast.operator) for n in ast.walk(tree.body)) and not any(
            isinstance(n, ast.Name | ast.Call | ast.Attribute) for n in ast.walk(tree.body)):
        return f"`{eval(compile(tree, 'default', 'eval'))!r}`"  # constants only
    return f"`{_cell(default)}`"


def settings_reference() -> str:
    settings = _classes(SETTINGS)["Settings"]
    rows = ["| variable | type | default | what it sets |", "| --- | --- | --- | --- |"]
    for name, (annotation, default, comment) in settings.fields.items():
        if not comment:
            raise ValueError(f"pipeline/settings.py: Settings.{name} has no `#:` comment "
                             "(the configuration reference is generated from them)")
        rows.append(f"| `CANONFLOW_{name.upper()}` | `{_cell(annotation)}` | "
                    f"{_default(default)} | {_cell(comment)} |")
    return "\n".join(rows) + "\n"


# ---- the event contract reference ---------------------------------------------------


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"array of {_type(prop.get('items', {}))}"
    if kind == "object" and "additionalProperties" in prop:
        extra = prop["additionalProperties"]
        return "object" if extra is True else f"object of {_type(extra)}"
    return str(kind) if not isinstance(kind, list) else " or ".join(kind)


def _examples() -> dict[str, dict[str, str]]:
    """(event type -> field -> example) from the goldens' canonical events: the first
    value seen; payload fields as `payload.<name>`."""
    found: dict[str, dict[str, str]] = {}
    for path in sorted(GOLDENS.glob("*/*.out.jsonl")):
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict) or "type" not in event:
                continue
            seen = found.setdefault(event["type"], {})
            items = list(event.items())
            payload = event.get("payload")
            if isinstance(payload, dict):
                items += [(f"payload.{k}", v) for k, v in payload.items()]
            for key, value in items:
                if key not in seen and key != "payload":
                    text = json.dumps(value, ensure_ascii=False)
                    seen[key] = text if len(text) <= 60 else text[:57] + "..."
    return found


def _field_doc(classes: dict[str, _Class], name: str, field: str) -> str:
    """The `#:` comment of `field` on class `name` or the nearest base that has one; else
    the sentences of the class's docstring that name the field in backticks."""
    todo = [name]
    while todo:
        cls = classes.get(todo.pop(0))
        if cls is None:
            continue
        if field in cls.fields and cls.fields[field][2]:
            return cls.fields[field][2]
        todo += cls.bases
    cls = classes.get(name)
    if cls is not None and f"`{field}`" in cls.doc:
        sentences = re.split(r"(?<=[.:;])\s+(?=[A-Z(`])", " ".join(cls.doc.split()))
        return " ".join(s for s in sentences if f"`{field}`" in s)
    return ""


#: What the envelope's fields mean (`_Event` in topics/canonical.py), for the fields
#: whose declaration carries no comment of its own.
ENVELOPE = {
    "type": "The event's family and kind (`turn.started`, ...): the tag of the union.",
    "schemaVersion": "The contract's version; it changes only on a breaking change, which "
                     "the evolution rules forbid. Always present.",
    "eventId": "canonflow's id of this event, the same when a record is translated again.",
    "seq": "The event's position in its session, from 1, with no gap.",
    "provider": "The runtime's provider id (`topics/runtimes.py`).",
    "sessionId": "The session: the raw record's key, the canonical record's key.",
    "createdAt": "When the runtime wrote the native message (RFC 3339, UTC, ms).",
    "threadId": "canonflow's id of the thread (a conversation inside the session).",
    "turnId": "canonflow's id of the turn (one prompt and everything it caused).",
    "itemId": "canonflow's id of the item (a message, a tool call, ...).",
    "requestId": "canonflow's id of the request (an approval or a question).",
    "parentAgentId": "The agent that started the event's subagent (absent: the root agent).",
    "parentItemId": "The item this one belongs to (a subagent's tool item, ...).",
    "providerRefs": "The runtime's own ids for the session, thread, turn, item, request.",
    "synthetic": "True when canonflow made the event up (an idle close, a turn the "
                 "runtime never ended), false when a native message said it.",
    "raw": "The native message, when `CANONFLOW_INCLUDE_RAW` is on.",
    "payload": "The typed payload of the event's type.",
}


def contract_reference() -> str:
    schema = json.loads(SCHEMA.read_text())
    classes: dict[str, _Class] = {}
    for path in CONTRACT_SOURCES:
        classes.update(_classes(path))
    examples = _examples()
    defs: dict[str, Any] = schema["$defs"]
    # a payload's event type, to find its examples
    event_of: dict[str, str] = {}
    for name, d in defs.items():
        props = d.get("properties", {})
        tag = props.get("type", {}).get("enum")
        if tag and len(tag) == 1 and isinstance(tag[0], str):
            event_of[name] = tag[0]
            ref = props.get("payload", {}).get("$ref")
            if ref:
                event_of.setdefault(ref.rsplit("/", 1)[1], tag[0])
    out = [f"Generated from `topics/canonflow.schema.json` (schema version "
           f"{schema.get('$id', '')}) and the msgspec types' comments; examples from the "
           "reviewed goldens. Every definition the schema holds is listed once, in "
           "alphabetical order.", ""]
    # the envelope once: every canonical event carries it (`_Event`)
    events = [n for n in sorted(defs) if n in event_of and "payload" in defs[n].get("properties", {})
              and defs[n]["properties"].get("type", {}).get("enum") == [event_of[n]]]
    sample = defs[events[0]]
    envelope = {k: v for k, v in sample["properties"].items() if k not in ("type", "payload")}
    out += ["### The envelope", "",
            "Every canonical event carries these fields beside its `type` and `payload`; the "
            "tables of the event types below list only those two.", "",
            "| field | type | required | description |", "| --- | --- | --- | --- |"]
    for field, prop in envelope.items():
        desc = (prop.get("description") or _field_doc(classes, "_Event", field)
                or ENVELOPE.get(field, ""))
        out.append(f"| `{field}` | {_cell(_type(prop))} | "
                   f"{'yes' if field in sample.get('required', []) else 'no'} | {_cell(desc)} |")
    out.append("")
    for name in sorted(defs):
        d = defs[name]
        out += [f"### {name}", ""]
        doc = (classes[name].doc if name in classes else d.get("description", "")).strip()
        if doc:
            out += [doc.split("\n\n")[0].replace("\n", " "), ""]
        props = d.get("properties")
        if not props:
            if "enum" in d:
                out += ["One of " + ", ".join(f"`{json.dumps(v)}`" for v in d["enum"]) + ".", ""]
            continue
        required = set(d.get("required", []))
        tag = event_of.get(name)
        is_payload = tag is not None and props.get("type", {}).get("enum") != [tag]
        seen = examples.get(tag, {}) if tag else {}
        out += ["| field | type | required | description | example |",
                "| --- | --- | --- | --- | --- |"]
        for field, prop in props.items():
            if name in events and field in envelope:
                continue
            desc = (prop.get("description") or _field_doc(classes, name, field)
                    or (ENVELOPE.get(field, "") if not is_payload else ""))
            if field == "type" and tag and not desc:
                desc = ENVELOPE["type"]
            example = seen.get(f"payload.{field}" if is_payload else field, "")
            out.append(f"| `{field}` | {_cell(_type(prop))} | "
                       f"{'yes' if field in required else 'no'} | {_cell(desc) or '-'} | "
                       f"{'`' + _cell(example) + '`' if example else '-'} |")
        out.append("")
    return "\n".join(out)


# ---- the runtime pages --------------------------------------------------------------


def runtimes() -> list[dict[str, str]]:
    """The entries of RUNTIMES, read from the source (id, name, package, raw_topic)."""
    tree = ast.parse(RUNTIMES.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Runtime":
            out.append({k.arg: ast.literal_eval(k.value) for k in node.keywords
                        if k.arg is not None})
    return out


def _markdown(doc: str) -> str:
    """A docstring as Markdown: a list gets the blank line above it that Markdown needs,
    and so does a table."""
    out: list[str] = []
    for line in doc.splitlines():
        starts = re.match(r"(\* |- |\| )", line)
        if starts and out and out[-1].strip() and not re.match(r"\s*(\* |- |\| )", out[-1]) \
                and not out[-1].startswith("  "):
            out.append("")
        out.append(line)
    return "\n".join(out)


def runtime_page(entry: dict[str, str]) -> str:
    path = ROOT.joinpath(*entry["package"].split(".")) / "translator.py"
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    title, _, body = doc.partition("\n")
    return "\n".join([
        f"# {entry['name']} (`{entry['id']}`)", "",
        f"Provider id `{entry['id']}`; raw topic `{entry['raw_topic']}`; adapter "
        f"`{entry['package']}` (`{path.relative_to(ROOT)}`). This page is the adapter's "
        "own description, generated from its docstring: what it reads, how it is "
        "translated, the releases verified and what the runtime cannot say.", "",
        f"**{title.split(':', 1)[-1].strip()}**", "",
        _markdown(body.strip()), ""])


def runtimes_table() -> str:
    rows = ["| provider id | runtime | raw topic | page |", "| --- | --- | --- | --- |"]
    for e in runtimes():
        rows.append(f"| `{e['id']}` | {e['name']} | `{e['raw_topic']}` | "
                    f"[{e['name']}]({e['id']}.md) |")
    return "\n".join(rows) + "\n"


# ---- the alert rules ---------------------------------------------------------------

ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"


def alerts_reference() -> str:
    """The rules of deploy/prometheus/alerts.yml: name, expression, duration, severity,
    and the comment above the rule (what it means)."""
    import yaml  # PyYAML: an MkDocs dependency

    lines = ALERTS.read_text().splitlines()
    rows = ["| alert | fires when | for | severity | meaning |",
            "| --- | --- | --- | --- | --- |"]
    for group in yaml.safe_load(ALERTS.read_text())["groups"]:
        for rule in group["rules"]:
            at = next(i for i, ln in enumerate(lines) if ln.strip() == f"- alert: {rule['alert']}")
            comment: list[str] = []
            while at > 0 and lines[at - 1].strip().startswith("#"):
                at -= 1
                comment.insert(0, lines[at].strip().lstrip("#").strip())
            rows.append(f"| `{rule['alert']}` | `{_cell(rule['expr'])}` | {rule.get('for', '-')} | "
                        f"{rule.get('labels', {}).get('severity', '-')} | {_cell(' '.join(comment))} |")
    return "\n".join(rows) + "\n"


# ---- MkDocs events ------------------------------------------------------------------

MARKERS = {
    "<!-- canonflow:settings -->": settings_reference,
    "<!-- canonflow:contract -->": contract_reference,
    "<!-- canonflow:runtimes -->": runtimes_table,
    "<!-- canonflow:alerts -->": alerts_reference,
}


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for entry in runtimes():
        files.append(File.generated(config, f"runtimes/{entry['id']}.md",
                                    content=runtime_page(entry)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, make in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown


if __name__ == "__main__":
    print({"settings": settings_reference, "contract": contract_reference,
           "runtimes": runtimes_table}[sys.argv[1]]())
