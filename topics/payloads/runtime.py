"""The payloads of what a runtime says about itself: auth, account,
MCP, model, config, deprecation, files and the runtime's warnings and errors."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from topics.payloads.base import ErrorClass, Payload


class AuthStatusPayload(Payload, frozen=True, kw_only=True):
    isAuthenticating: bool | UnsetType = UNSET
    output: list[str] | UnsetType = UNSET
    error: str | UnsetType = UNSET


class AccountUpdatedPayload(Payload, frozen=True, kw_only=True):
    account: Any


class AccountRateLimitsUpdatedPayload(Payload, frozen=True, kw_only=True):
    rateLimits: Any


class McpStatusUpdatedPayload(Payload, frozen=True, kw_only=True):
    status: Any


class McpOauthCompletedPayload(Payload, frozen=True, kw_only=True):
    success: bool
    name: str | UnsetType = UNSET
    error: str | UnsetType = UNSET


class ModelReroutedPayload(Payload, frozen=True, kw_only=True):
    fromModel: str
    toModel: str
    reason: str


class ConfigWarningPayload(Payload, frozen=True, kw_only=True):
    summary: str
    details: str | UnsetType = UNSET
    path: str | UnsetType = UNSET
    range: Any | UnsetType = UNSET


class DeprecationNoticePayload(Payload, frozen=True, kw_only=True):
    summary: str
    details: str | UnsetType = UNSET


class PersistedFile(Payload, frozen=True, kw_only=True):
    filename: str
    fileId: str


class FailedFile(Payload, frozen=True, kw_only=True):
    filename: str
    error: str


class FilesPersistedPayload(Payload, frozen=True, kw_only=True):
    files: list[PersistedFile]
    failed: list[FailedFile] | UnsetType = UNSET


class RuntimeWarningPayload(Payload, frozen=True, kw_only=True):
    message: str
    detail: Any | UnsetType = UNSET


class RuntimeErrorPayload(Payload, frozen=True, kw_only=True):
    message: str
    errorClass: ErrorClass | UnsetType = msgspec.field(default=UNSET, name="class")
    willRetry: bool | UnsetType = UNSET
    detail: Any | UnsetType = UNSET
