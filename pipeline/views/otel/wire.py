"""The wire half of the OpenTelemetry export: `Span`s as the OpenTelemetry SDK's
ReadableSpans, encoded and sent by the SDK's own OTLP/HTTP exporter (so every standard
OTEL_EXPORTER_OTLP_* setting works), and where they go (`traces_url`). The SDK is
imported inside the functions that use it."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from pipeline.views.otel.model import (
    KIND_CLIENT,
    KIND_INTERNAL,
    SCHEMA_URL,
    SCOPE_NAME,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    AttrValue,
    Span,
)

log = logging.getLogger("canonflow.otel")

DEFAULT_ENDPOINT = "http://127.0.0.1:4318"
TRACES_PATH = "/v1/traces"


def resource_attributes(env: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """service.name (OTEL_SERVICE_NAME, default canonflow) and OTEL_RESOURCE_ATTRIBUTES."""
    env = os.environ if env is None else env
    attrs: dict[str, str] = {}
    for pair in env.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            attrs[key.strip()] = unquote(value.strip())
    attrs["service.name"] = (env.get("OTEL_SERVICE_NAME") or attrs.get("service.name")
                             or "canonflow")
    return tuple(sorted(attrs.items()))


@functools.cache
def _scope_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("canonflow")
    except PackageNotFoundError:
        return "0"


def readable_spans(spans: Iterable[Span], resource: Iterable[tuple[str, AttrValue]] = (
        ("service.name", "canonflow"),)) -> list[Any]:
    """`spans` as the SDK's ReadableSpans (what its OTLP exporter sends), under one
    resource and the canonflow.otel scope, both with SCHEMA_URL."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    res = Resource(dict(resource), schema_url=SCHEMA_URL)
    scope = InstrumentationScope(SCOPE_NAME, _scope_version(), schema_url=SCHEMA_URL)
    kinds = {KIND_INTERNAL: SpanKind.INTERNAL, KIND_CLIENT: SpanKind.CLIENT}
    codes = {STATUS_UNSET: StatusCode.UNSET, STATUS_OK: StatusCode.OK,
             STATUS_ERROR: StatusCode.ERROR}
    flags = TraceFlags(TraceFlags.SAMPLED)

    def context(trace_id: bytes, span_id: bytes) -> SpanContext:
        return SpanContext(int.from_bytes(trace_id), int.from_bytes(span_id),
                           is_remote=False, trace_flags=flags)

    out = []
    for s in spans:
        code = codes[s.status_code]
        out.append(ReadableSpan(
            name=s.name, context=context(s.trace_id, s.span_id),
            parent=context(s.trace_id, s.parent_span_id) if s.parent_span_id else None,
            resource=res, attributes=dict(s.attributes), kind=kinds[s.kind],
            events=[Event(e.name, dict(e.attributes), e.time_ns) for e in s.events],
            status=Status(code, s.status_message if code is StatusCode.ERROR else None),
            start_time=s.start_ns, end_time=s.end_ns, instrumentation_scope=scope))
    return out


def encode_request(spans: Iterable[Span], resource: Iterable[tuple[str, AttrValue]] = (
        ("service.name", "canonflow"),)) -> bytes:
    """The OTLP ExportTraceServiceRequest carrying `spans`, as the exporter encodes it."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(readable_spans(spans, resource)).SerializeToString(deterministic=True)


def traces_url(endpoint: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """Where spans go: --endpoint (a base URL), else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    (used as is), else OTEL_EXPORTER_OTLP_ENDPOINT (a base URL), else 127.0.0.1:4318.
    /v1/traces is appended to a base URL that does not already end with it.

    Raises ValueError when the result is not an http(s) URL with a host (the exporter
    would retry such a URL until its timeout instead of saying it is wrong).
    """
    from urllib.parse import urlsplit

    env = os.environ if env is None else env
    if not endpoint and env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        url = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    else:
        base = (endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
                ).rstrip("/")
        url = base if base.endswith(TRACES_PATH) else base + TRACES_PATH
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as e:
        raise ValueError(f"OTLP endpoint {url!r}: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"OTLP endpoint {url!r} is not an http:// or https:// URL "
                         "with a host")
    return url


class Exporter:
    """Sends span batches through the official OTLP/HTTP span exporter
    (opentelemetry-exporter-otlp-proto-http), so every OTEL_EXPORTER_OTLP_* setting
    works as it does for any OpenTelemetry SDK: headers, certificate and client key,
    timeout (seconds), compression. The SDK exporter retries 429/502/503/504 and
    connection errors with exponential backoff until the timeout runs out.

    `export` never raises for a network or HTTP failure: it logs, counts the spans as
    dropped and returns False, so the exporter goes on with the next batch. The SDK
    exporter blocks, so it runs in a thread.
    """

    def __init__(self, url: str,
                 resource: Iterable[tuple[str, AttrValue]] = (("service.name", "canonflow"),)):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.url, self.resource = url, tuple(resource)
        self.exported = self.dropped = 0
        self._sdk = OTLPSpanExporter(endpoint=url)

    async def __aenter__(self) -> Exporter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._sdk.shutdown()

    async def export(self, spans: list[Span]) -> bool:
        import asyncio

        from opentelemetry.sdk.trace.export import SpanExportResult

        if not spans:
            return True
        batch = readable_spans(spans, self.resource)
        result = await asyncio.to_thread(self._sdk.export, batch)
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
            return True
        log.error("otel-export: dropped %d span(s) for %s", len(spans), self.url)
        self.dropped += len(spans)
        return False
