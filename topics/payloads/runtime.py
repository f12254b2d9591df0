"""The payloads of what a runtime says about itself: auth, account,
MCP, model, config, deprecation, files and the runtime's warnings and errors."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from topics.payloads.base import ErrorClass, Payload


class AuthStatusPayload(Payload, frozen=True, kw_only=True):
    #: Whether the runtime is authenticating now.
    isAuthenticating: bool | UnsetType = UNSET
    #: The lines the authentication printed.
    output: list[str] | UnsetType = UNSET
    #: The authentication error, when there is one.
    error: str | UnsetType = UNSET


class AccountUpdatedPayload(Payload, frozen=True, kw_only=True):
    #: The runtime's account details, as it sent them.
    account: Any


class AccountRateLimitsUpdatedPayload(Payload, frozen=True, kw_only=True):
    #: The runtime's rate-limit status, as it sent it.
    rateLimits: Any


class McpStatusUpdatedPayload(Payload, frozen=True, kw_only=True):
    #: The MCP servers' status, as the runtime sent it.
    status: Any


class McpOauthCompletedPayload(Payload, frozen=True, kw_only=True):
    #: Whether the login succeeded.
    success: bool
    #: The MCP server.
    name: str | UnsetType = UNSET
    #: Why the login failed, when it did.
    error: str | UnsetType = UNSET


class ModelReroutedPayload(Payload, frozen=True, kw_only=True):
    #: The model asked for.
    fromModel: str
    #: The model used instead.
    toModel: str
    #: Why the runtime rerouted.
    reason: str


class ConfigWarningPayload(Payload, frozen=True, kw_only=True):
    #: The warning in one line.
    summary: str
    #: The warning's details.
    details: str | UnsetType = UNSET
    #: The configuration file concerned.
    path: str | UnsetType = UNSET
    #: Where in the file, as the runtime sent it.
    range: Any | UnsetType = UNSET


class DeprecationNoticePayload(Payload, frozen=True, kw_only=True):
    #: The notice in one line.
    summary: str
    #: The notice's details.
    details: str | UnsetType = UNSET


class PersistedFile(Payload, frozen=True, kw_only=True):
    #: The file's name.
    filename: str
    #: The runtime's id of the stored file.
    fileId: str


class FailedFile(Payload, frozen=True, kw_only=True):
    #: The file's name.
    filename: str
    #: Why the file was not persisted.
    error: str


class FilesPersistedPayload(Payload, frozen=True, kw_only=True):
    #: The files persisted.
    files: list[PersistedFile]
    #: The files that could not be persisted.
    failed: list[FailedFile] | UnsetType = UNSET


class RuntimeWarningPayload(Payload, frozen=True, kw_only=True):
    #: The warning's message.
    message: str
    #: What the warning is about (e.g. the native message canonflow could not place).
    detail: Any | UnsetType = UNSET


class RuntimeErrorPayload(Payload, frozen=True, kw_only=True):
    #: The error's message.
    message: str
    #: The error's class, the same words for every runtime (`class` on the wire).
    errorClass: ErrorClass | UnsetType = msgspec.field(default=UNSET, name="class")
    #: Whether the runtime says it retries.
    willRetry: bool | UnsetType = UNSET
    #: The runtime's own error, as it sent it.
    detail: Any | UnsetType = UNSET
