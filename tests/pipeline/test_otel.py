"""`canonflow otel-export`: canonical events -> OTLP spans, sent by the OpenTelemetry
SDK's OTLP/HTTP exporter and received by a real OTLP/HTTP receiver on 127.0.0.1 (plain
or TLS) that parses every request with opentelemetry-proto."""

from __future__ import annotations

import asyncio
import gzip
import json
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from pipeline.tools.kafka_io import produce, records_from_file
from pipeline.views.otel import (
    SCHEMA_URL,
    NoEventTime,
    SpanBuilder,
    build_spans,
    item_span_id,
    provider_name,
    trace_id_for,
    traces_url,
    turn_span_id,
)
from tests.pipeline.conftest import read_topic, timed
from topics.catalog import CANONICAL_TOPIC

TESTS = Path(__file__).resolve().parents[1]
CAPTURED = TESTS / "fixtures" / "captured"
GOLDENS = TESTS / "adapters" / "goldens"
CODEX_SHELL = CAPTURED / "codex" / "codex-app-server__tool_shell.capture.jsonl"
CLAUDE_SHELL = CAPTURED / "claude" / "claude-code-stream-json__tool_shell.capture.jsonl"
FAILED_TURN = GOLDENS / "codex-exec" / "error_turn_failed.in.jsonl"

CLI = [sys.executable, "-m", "pipeline.cli"]
#: The command as the lead will wire it (`canonflow otel-export`), run standalone.
OTEL_EXPORT = [sys.executable, "-c", "from pipeline.views.otel import otel_export; otel_export()"]


# ---- a real OTLP/HTTP receiver ---------------------------------------------------


class Receiver:
    """OTLP/HTTP trace receiver on 127.0.0.1: POST /v1/traces, protobuf bodies.

    The first `fail_first` requests get 503 (to exercise retries); every accepted
    request is parsed as an ExportTraceServiceRequest (after undoing its
    Content-Encoding) and kept with its raw body and headers. With `tls` (a cert and key
    file), it speaks HTTPS."""

    def __init__(self, fail_first: int = 0, tls: tuple[Path, Path] | None = None):
        self.fail_first = fail_first
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.requests: list[ExportTraceServiceRequest] = []
        self.seen: list[tuple[str, str | None, int]] = []  # (path, content-type, status)
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    status = 503 if len(receiver.seen) < receiver.fail_first else 200
                    if self.path != "/v1/traces":
                        status = 404
                    receiver.seen.append((self.path, self.headers.get("Content-Type"), status))
                    if status == 200:
                        if self.headers.get("Content-Encoding") == "gzip":
                            body = gzip.decompress(body)
                        receiver.requests.append(ExportTraceServiceRequest.FromString(body))
                        receiver.bodies.append(body)
                        receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = ExportTraceServiceResponse().SerializeToString() if status == 200 else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def spans(self) -> list[Span]:
        return [s for r in self.requests for rs in r.resource_spans for ss in rs.scope_spans
                for s in ss.spans]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def attrs(span_or_event: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span_or_event.attributes:
        kind = kv.value.WhichOneof("value")
        if kind == "array_value":
            out[kv.key] = [v.string_value for v in kv.value.array_value.values]
        else:
            out[kv.key] = getattr(kv.value, kind)
    return out


#: A record time (ms) for events that have none of their own.
T0_MS = 1_764_000_000_000


def replay(provider: str, path: Path, out: Path, *, session: str | None = None,
           stamp: bool = True) -> Path:
    """`canonflow replay --format capture` of a capture (given capture times first, with
    `stamp`, when it has none), written to `out`."""
    if stamp and '"t":' not in path.read_text():
        (out.parent / "timed").mkdir(exist_ok=True)
        path = timed(path, out.parent / "timed")  # the same name: it gives the session
    args = [*CLI, "replay", "-p", provider, "--format", "capture", str(path)]
    if session:
        args += ["--session", session]
    out.write_bytes(subprocess.run(args, capture_output=True, check=True, timeout=60).stdout)
    return out


def export(*args: str, env: dict[str, str] | None = None, timeout: float = 120
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*OTEL_EXPORT, *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def one(spans: list[Span], prefix: str) -> Span:
    [span] = [s for s in spans if s.name.startswith(prefix)]
    return span


# ---- from replayed captures --------------------------------------------------------


def test_codex_app_server_turn_is_an_invoke_agent_span_with_its_tool_call_as_a_child(
        receiver: Receiver, tmp_path: Path):
    events = replay("codex", CODEX_SHELL, tmp_path / "codex.jsonl")
    r = export("--from-file", str(events), "--endpoint", receiver.url)
    assert r.returncode == 0, r.stderr
    assert {(path, ctype) for path, ctype, _ in receiver.seen} == {
        ("/v1/traces", "application/x-protobuf")}
    [request] = receiver.requests
    resource = {kv.key: kv.value.string_value
                for kv in request.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "canonflow"
    assert request.resource_spans[0].scope_spans[0].scope.name == "canonflow.otel"
    assert request.resource_spans[0].schema_url == SCHEMA_URL
    assert request.resource_spans[0].scope_spans[0].schema_url == SCHEMA_URL
    assert receiver.headers[0]["user-agent"].startswith("OTel-OTLP-Exporter-Python/")

    spans = receiver.spans()
    assert sorted(s.name for s in spans) == ["execute_tool Bash", "invoke_agent codex"]
    turn, tool = one(spans, "invoke_agent"), one(spans, "execute_tool")
    t = attrs(turn)
    assert t["gen_ai.operation.name"] == "invoke_agent"
    assert t["gen_ai.conversation.id"] == "codex-app-server__tool_shell"
    assert t["gen_ai.agent.name"] == "codex" and t["canonflow.provider"] == "codex"
    # session.configured names the model provider ("fixture" in this capture); the
    # deprecated gen_ai.system is not sent
    assert t["gen_ai.provider.name"] == "fixture" and "gen_ai.system" not in t
    assert t["gen_ai.request.model"] == t["gen_ai.response.model"] == "gpt-5.5"
    # two model calls in the turn, thread totals 1240 then 2480 tokens
    assert (t["gen_ai.usage.input_tokens"], t["gen_ai.usage.output_tokens"]) == (2400, 80)
    assert t["canonflow.turn.state"] == "completed" and "error.type" not in t
    assert turn.kind == Span.SPAN_KIND_CLIENT
    assert turn.status.code == Status.STATUS_CODE_UNSET and turn.parent_span_id == b""
    # dated by the capture's times (`timed` gives its lines), not the epoch
    assert turn.start_time_unix_nano > 1_764_000_000_000 * 10**6

    a = attrs(tool)
    assert a["gen_ai.operation.name"] == "execute_tool"
    assert a["gen_ai.tool.name"] == "Bash"
    assert a["gen_ai.tool.call.id"] == "call_723fe080b2774c6e9a10e6fb"
    assert a["gen_ai.tool.type"] == "function"
    assert a["process.exit.code"] == 0 and "error.type" not in a
    assert "gen_ai.tool.call.arguments" not in a  # content is opt-in
    assert tool.kind == Span.SPAN_KIND_INTERNAL
    assert tool.parent_span_id == turn.span_id and tool.trace_id == turn.trace_id
    session, turn_id = "codex-app-server__tool_shell", t["canonflow.turn.id"]
    assert turn.trace_id == trace_id_for(session, turn_id)
    assert turn.span_id == turn_span_id(session, turn_id)
    assert tool.span_id == item_span_id(session, a["canonflow.item.id"])


def test_claude_stream_json_turn_carries_anthropic_usage_and_finish_reason(
        receiver: Receiver, tmp_path: Path):
    events = replay("claude", CLAUDE_SHELL, tmp_path / "claude.jsonl")
    r = export("--from-file", str(events), "--endpoint", receiver.url, "--capture-content")
    assert r.returncode == 0, r.stderr
    spans = receiver.spans()
    turn, tool = one(spans, "invoke_agent claude"), one(spans, "execute_tool Bash")
    t = attrs(turn)
    assert t["gen_ai.provider.name"] == "anthropic"
    assert t["gen_ai.request.model"] == "claude-opus-5-5"
    assert t["gen_ai.response.model"] == "claude-opus-5-5"  # from the result's modelUsage
    assert (t["gen_ai.usage.input_tokens"], t["gen_ai.usage.output_tokens"]) == (2400, 84)
    assert t["gen_ai.usage.cache_read.input_tokens"] == 0
    assert t["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert t["canonflow.turn.cost_usd"] == pytest.approx(0.01128)
    a = attrs(tool)
    assert a["gen_ai.tool.call.id"] == "toolu_0162aa18897d0e4e479fb410de"
    assert json.loads(a["gen_ai.tool.call.arguments"])["command"] == "printf 'fixture-ok\\n'"
    assert a["gen_ai.tool.call.result"] == "fixture-ok"
    assert (tool.trace_id, tool.parent_span_id) == (turn.trace_id, turn.span_id)


def test_a_failed_turn_has_error_status_error_type_and_its_runtime_errors_as_events(
        receiver: Receiver, tmp_path: Path):
    events = replay("codex-exec", FAILED_TURN, tmp_path / "failed.jsonl", session="s1")
    r = export("--from-file", str(events), "--endpoint", receiver.url)
    assert r.returncode == 0, r.stderr
    spans = receiver.spans()
    turn, tool = one(spans, "invoke_agent codex-exec"), one(spans, "execute_tool Bash")
    t = attrs(turn)
    assert turn.status.code == Status.STATUS_CODE_ERROR
    assert turn.status.message == "stream disconnected before completion"
    assert t["error.type"] == "provider_error" and t["canonflow.turn.state"] == "failed"
    assert t["gen_ai.provider.name"] == "openai"
    errors = [attrs(e) for e in turn.events if e.name == "runtime.error"]
    assert [e["canonflow.error.will_retry"] for e in errors] == [True, False, False]
    # the command the failure cut short: closed by the adapter, failed
    assert tool.status.code == Status.STATUS_CODE_ERROR
    assert attrs(tool)["error.type"] == "tool_error"
    assert tool.parent_span_id == turn.span_id
    # times come from the capture (t = 1764441800100 .. 1764441800600 ms)
    assert (turn.start_time_unix_nano, turn.end_time_unix_nano) == (
        1764441800100 * 10**6, 1764441800600 * 10**6)
    assert (tool.start_time_unix_nano, tool.end_time_unix_nano) == (
        1764441800200 * 10**6, 1764441800600 * 10**6)


def test_two_runs_send_byte_identical_requests(tmp_path: Path):
    events = replay("codex", CODEX_SHELL, tmp_path / "codex.jsonl")
    bodies = []
    for _ in range(2):
        with Receiver() as r:
            assert export("--from-file", str(events), "--endpoint", r.url).returncode == 0
            bodies.append(r.bodies)
    assert bodies[0] == bodies[1] and len(bodies[0]) == 1


def test_a_failing_receiver_is_retried_and_the_spans_arrive_once(tmp_path: Path):
    events = replay("claude", CLAUDE_SHELL, tmp_path / "claude.jsonl")
    with Receiver() as ok:
        assert export("--from-file", str(events), "--endpoint", ok.url).returncode == 0
    with Receiver(fail_first=2) as flaky:
        r = export("--from-file", str(events), "--endpoint", flaky.url)
        assert r.returncode == 0, r.stderr
    assert [status for _, _, status in flaky.seen] == [503, 503, 200]
    assert flaky.bodies == ok.bodies
    assert r.stderr.count("retrying in") == 2


def test_an_unreachable_endpoint_drops_the_spans_and_exits_1_within_the_otlp_timeout(
        tmp_path: Path):
    events = replay("claude", CLAUDE_SHELL, tmp_path / "claude.jsonl")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    r = export("--from-file", str(events), "--endpoint", f"http://127.0.0.1:{port}",
               env=_env(OTEL_EXPORTER_OTLP_TIMEOUT="2"))
    assert r.returncode == 1
    assert "dropped 2 span(s)" in r.stderr
    assert time.monotonic() - started < 30  # two seconds of retries, not the default ten


def test_an_endpoint_that_is_not_a_url_is_a_usage_error(tmp_path: Path):
    events = replay("claude", CLAUDE_SHELL, tmp_path / "claude.jsonl")
    for bad in ("not-a-url", "http://", "http://127.0.0.1:port"):
        r = export("--from-file", str(events), "--endpoint", bad)
        assert r.returncode == 2, r.stderr
        [line] = [x for x in r.stderr.splitlines() if x.startswith("Error")]
        assert "OTLP endpoint" in line and "Traceback" not in r.stderr


def test_events_without_capture_times_are_refused_not_dated_1970(receiver: Receiver,
                                                                  tmp_path: Path):
    events = replay("claude", CLAUDE_SHELL, tmp_path / "claude.jsonl", stamp=False)
    assert '"createdAt":"1970-01-01T00:00:00.000Z"' in events.read_text()
    r = export("--from-file", str(events), "--endpoint", receiver.url)
    assert r.returncode == 1 and receiver.seen == []
    assert "had no capture times" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def _env(**extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", **extra}


def test_the_standard_otlp_settings_headers_compression_and_certificate_apply(
        tmp_path: Path):
    events = replay("claude", CLAUDE_SHELL, tmp_path / "claude.jsonl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    with Receiver(tls=(cert, key)) as r:
        env = _env(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{r.url}/v1/traces",
                   OTEL_EXPORTER_OTLP_HEADERS="x-tenant=fleet%20a,authorization=Bearer t0k",
                   OTEL_EXPORTER_OTLP_COMPRESSION="gzip",
                   OTEL_EXPORTER_OTLP_CERTIFICATE=str(cert))
        done = export("--from-file", str(events), env=env)
        assert done.returncode == 0, done.stderr
        # without the certificate, the receiver's is not trusted: nothing is delivered
        env.pop("OTEL_EXPORTER_OTLP_CERTIFICATE")
        env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "2"
        untrusted = export("--from-file", str(events), env=env)
    [headers] = r.headers
    assert headers["x-tenant"] == "fleet a" and headers["authorization"] == "Bearer t0k"
    assert headers["content-encoding"] == "gzip"
    assert sorted(s.name for s in r.spans()) == ["execute_tool Bash", "invoke_agent claude"]
    assert untrusted.returncode == 1 and "dropped 2 span(s)" in untrusted.stderr


def test_bad_lines_are_skipped_and_the_rest_exported(receiver: Receiver, tmp_path: Path):
    good = replay("codex", CODEX_SHELL, tmp_path / "codex.jsonl").read_bytes().splitlines()
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(b"\n".join([b"{not json", b"[1, 2]", b'{"type": "turn.started"}',
                                  b'{"type": "x", "sessionId": "s", "createdAt": "never"}',
                                  *good]) + b"\n")
    r = export("--from-file", str(mixed), "--endpoint", receiver.url)
    assert r.returncode == 0, r.stderr
    assert "4 bad" in r.stderr
    assert sorted(s.name for s in receiver.spans()) == ["execute_tool Bash",
                                                         "invoke_agent codex"]


def test_the_endpoint_comes_from_the_otel_environment(receiver: Receiver, tmp_path: Path):
    events = replay("claude", CLAUDE_SHELL, tmp_path / "claude.jsonl")
    env = _env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="fleet-a")
    assert export("--from-file", str(events), env=env).returncode == 0
    [request] = receiver.requests
    assert {kv.key: kv.value.string_value for kv in
            request.resource_spans[0].resource.attributes} == {"service.name": "fleet-a"}


# ---- from agents.canonical on the embedded broker ----------------------------------


def test_spans_of_a_session_read_from_agents_canonical(settings, worker, receiver: Receiver):
    session = "sess-otel"
    asyncio.run(produce(settings, "codex", session, records_from_file(str(CODEX_SHELL),
                                                                      "capture")))
    offline = subprocess.run([*CLI, "replay", "-p", "codex", "--format", "capture",
                              "--session", session, str(CODEX_SHELL)],
                             capture_output=True, check=True).stdout.splitlines()
    # wait until the worker has published the whole session, then export it
    assert len(read_topic(settings, CANONICAL_TOPIC, len(offline), key=session.encode(),
                          worker=worker)) == len(offline)
    # a long-running exporter: spans arrive while it runs; SIGTERM ends it cleanly
    proc = subprocess.Popen([*OTEL_EXPORT, "--broker", settings.broker, "--session", session,
                             "--endpoint", receiver.url], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(receiver.spans()) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert f"exported to {receiver.url}/v1/traces, 0 dropped" in stderr
    spans = receiver.spans()
    assert sorted(s.name for s in spans) == ["execute_tool Bash", "invoke_agent codex"]
    turn, tool = one(spans, "invoke_agent"), one(spans, "execute_tool")
    t = attrs(turn)
    assert t["gen_ai.conversation.id"] == session
    assert (t["gen_ai.usage.input_tokens"], t["gen_ai.usage.output_tokens"]) == (2400, 80)
    assert (tool.trace_id, tool.parent_span_id) == (turn.trace_id, turn.span_id)
    assert turn.trace_id == trace_id_for(session, t["canonflow.turn.id"])
    # no `t` in the capture: times are the records' broker timestamps
    assert 0 < turn.start_time_unix_nano <= tool.start_time_unix_nano
    assert tool.end_time_unix_nano <= turn.end_time_unix_nano
    # the same events from a file give the same ids (whatever their times)
    offline_builder = SpanBuilder()
    from_file = [s for line in offline for s in offline_builder.feed(json.loads(line), 1)]
    assert {(s.trace_id, s.span_id) for s in from_file} == {(s.trace_id, s.span_id)
                                                            for s in spans}


# ---- the pure half -----------------------------------------------------------------


def _usage_attrs(payload: dict[str, Any]) -> dict[str, Any]:
    events = [_ev(1, "turn.started", {}, turnId="t"),
              _ev(2, "turn.completed", {"state": "completed", **payload}, turnId="t")]
    return {k: v for k, v in build_spans(events)[0].attrs().items()
            if k.startswith("gen_ai.usage.")}


def test_the_span_counts_the_typed_tokens_and_never_the_native_usage():
    typed = {"input": 1110, "cachedInput": 1000, "cacheWrite": 10, "output": 7,
             "reasoningOutput": 2, "total": 1117}
    native = {"input_tokens": 100, "output_tokens": 7, "cache_read_input_tokens": 1000}
    assert _usage_attrs({"tokens": typed, "usage": native}) == {
        "gen_ai.usage.input_tokens": 1110, "gen_ai.usage.output_tokens": 7,
        "gen_ai.usage.cache_read.input_tokens": 1000,
        "gen_ai.usage.cache_creation.input_tokens": 10}
    assert _usage_attrs({"usage": native}) == {}
    assert _usage_attrs({"tokens": {"input": "many"}}) == {}


def _ev(seq: int, etype: str, payload: dict[str, Any], **ids: str) -> dict[str, Any]:
    return {"type": etype, "sessionId": "s", "provider": "codex", "seq": seq,
            "createdAt": f"2026-01-01T00:00:{seq:02d}.000Z", "payload": payload, **ids}


def _codex_turn(n: int, seq: int, total_in: int, total_out: int) -> list[dict[str, Any]]:
    usage = {"total": {"inputTokens": total_in, "outputTokens": total_out},
             "last": {"inputTokens": 1, "outputTokens": 1}}
    return [_ev(seq, "turn.started", {"model": "gpt-5.5"}, turnId=f"t{n}"),
            _ev(seq + 1, "thread.token-usage.updated", {"usage": usage}, turnId=f"t{n}"),
            _ev(seq + 2, "turn.completed", {"state": "completed", "usage": usage},
                turnId=f"t{n}")]


def test_late_events_do_not_reopen_a_finished_turn_and_open_ones_close_at_the_end():
    events = [*_codex_turn(1, 1, 10, 1),
              _ev(4, "thread.token-usage.updated", {"usage": {}}, turnId="t1"),
              _ev(5, "turn.started", {}, turnId="t2"),
              _ev(6, "item.started", {"itemType": "web_search", "toolName": "WebSearch"},
                  turnId="t2", itemId="i1")]
    assert [s.name for s in build_spans(events, close=False)] == ["invoke_agent codex"]
    spans = build_spans(events)
    assert [(s.name, s.attrs().get("canonflow.incomplete")) for s in spans] == [
        ("invoke_agent codex", None), ("execute_tool WebSearch", True),
        ("invoke_agent codex", True)]
    assert spans[1].attrs()["gen_ai.tool.type"] == "extension"
    assert spans[1].parent_span_id == spans[2].span_id


def test_approvals_are_events_on_the_tool_span_they_gate():
    events = [_ev(1, "turn.started", {}, turnId="t"),
              _ev(2, "item.started", {"itemType": "command_execution", "toolName": "Bash"},
                  turnId="t", itemId="i"),
              _ev(3, "request.opened", {"requestType": "command_execution_approval",
                                        "toolName": "Bash"},
                  turnId="t", itemId="i", requestId="r"),
              _ev(5, "request.resolved", {"requestType": "command_execution_approval",
                                          "decision": "reject_once", "outcome": "decline"},
                  turnId="t", itemId="i", requestId="r"),
              _ev(6, "item.completed", {"itemType": "command_execution", "toolName": "Bash",
                                        "status": "declined"}, turnId="t", itemId="i"),
              _ev(7, "turn.completed", {"state": "completed"}, turnId="t")]
    tool, turn = build_spans(events)
    assert [(e.name, dict(e.attributes).get("canonflow.request.decision"),
             dict(e.attributes).get("canonflow.request.outcome")) for e in tool.events
            ] == [("request.opened", None, None), ("request.resolved", "reject_once", "decline")]
    assert dict(tool.events[1].attributes)["canonflow.request.wait_ms"] == 2000
    assert tool.attrs()["error.type"] == "declined" and tool.status_code == 2
    assert turn.events == () and turn.status_code == 0


def test_epoch_events_take_their_record_time_or_are_refused():
    undated = [{**e, "createdAt": "1970-01-01T00:00:00.000Z"} for e in _codex_turn(1, 1, 10, 1)]
    with pytest.raises(NoEventTime, match="had no capture times"):
        build_spans(undated)
    builder = SpanBuilder()
    spans = [s for i, e in enumerate(undated) for s in builder.feed(e, T0_MS + i)]
    assert [(s.start_ns, s.end_ns) for s in spans] == [(T0_MS * 10**6, (T0_MS + 2) * 10**6)]


def test_the_provider_name_is_the_model_provider_never_the_agent_runtime():
    assert provider_name("claude", None) == "anthropic"
    assert provider_name("codex", "gpt-5.5", "azure") == "azure"  # Codex's modelProvider
    assert provider_name("opencode", "anthropic/claude-haiku-4-5") == "anthropic"
    assert provider_name("opencode", "google/gemini-3-pro") == "gcp.gemini"
    assert provider_name("acp", "claude-sonnet-4-5") == "anthropic"
    assert provider_name("amp", "gpt-5") == "openai"
    assert provider_name("acp", "Gemini-3-Flash") == "gcp.gemini"
    assert provider_name("acp", None) == provider_name("amp", "house-model") == "_OTHER"


def test_traces_url_follows_the_otlp_exporter_environment():
    assert traces_url(None, {}) == "http://127.0.0.1:4318/v1/traces"
    assert traces_url("http://c:4318/", {}) == "http://c:4318/v1/traces"
    assert traces_url(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://e:1"}) == "http://e:1/v1/traces"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://e:1",
           "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:2/custom"}
    assert traces_url(None, env) == "http://t:2/custom"
    assert traces_url("http://cli:3", env) == "http://cli:3/v1/traces"
