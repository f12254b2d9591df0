"""The payloads of what a runtime says about itself: auth, account,
MCP, model, config, deprecation, files and the runtime's warnings and errors."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

from topics.payloads.base import ErrorClass, Payload


class AuthStatusPayload(Payload, frozen=True, kw_only=True):
    isAuthenticating: Annotated[bool | UnsetType, Meta(description=(
        "True while the runtime is logging in; absent when it does not say."))] = UNSET
    output: Annotated[list[str] | UnsetType, Meta(description=(
        "The login's output lines, as the runtime sent them; absent when none."))] = UNSET
    error: Annotated[str | UnsetType, Meta(description=(
        "Why authentication failed; absent when it did not fail."))] = UNSET


class AccountUpdatedPayload(Payload, frozen=True, kw_only=True):
    account: Annotated[Any, Meta(description=(
        "The account as the runtime describes it, in its own shape."))]


class AccountRateLimitsUpdatedPayload(Payload, frozen=True, kw_only=True):
    rateLimits: Annotated[Any, Meta(description=(
        "The account's rate limits as the runtime reports them, in its own shape."))]


class McpStatusUpdatedPayload(Payload, frozen=True, kw_only=True):
    status: Annotated[Any, Meta(description=(
        "The MCP servers' status as the runtime reports it, in its own shape."))]


class McpOauthCompletedPayload(Payload, frozen=True, kw_only=True):
    success: Annotated[bool, Meta(description="Whether the MCP server's OAuth login succeeded.")]
    name: Annotated[str | UnsetType, Meta(description=(
        "The MCP server's name; absent when not given."))] = UNSET
    error: Annotated[str | UnsetType, Meta(description=(
        "Why the login failed; absent on success."))] = UNSET


class ModelReroutedPayload(Payload, frozen=True, kw_only=True):
    fromModel: Annotated[str, Meta(description="The model the runtime was using.")]
    toModel: Annotated[str, Meta(description="The model it uses from now on.")]
    reason: Annotated[str, Meta(description="Why it changed model, in the runtime's words.")]


class ConfigWarningPayload(Payload, frozen=True, kw_only=True):
    summary: Annotated[str, Meta(description="The warning, in one line, in the runtime's words.")]
    details: Annotated[str | UnsetType, Meta(description=(
        "More of the warning; absent when none."))] = UNSET
    path: Annotated[str | UnsetType, Meta(description=(
        "The configuration file it is about; absent when none."))] = UNSET
    range: Annotated[Any | UnsetType, Meta(description=(
        "Where in that file, in the runtime's own shape; absent when none."))] = UNSET


class DeprecationNoticePayload(Payload, frozen=True, kw_only=True):
    summary: Annotated[str, Meta(description="The notice, in one line, in the runtime's words.")]
    details: Annotated[str | UnsetType, Meta(description=(
        "More of the notice; absent when none."))] = UNSET


class PersistedFile(Payload, frozen=True, kw_only=True):
    filename: Annotated[str, Meta(description="The file's name, as the runtime gives it.")]
    fileId: Annotated[str, Meta(description="The runtime's id of the stored file.")]


class FailedFile(Payload, frozen=True, kw_only=True):
    filename: Annotated[str, Meta(description="The file's name, as the runtime gives it.")]
    error: Annotated[str, Meta(description="Why it could not be stored, in the runtime's words.")]


class FilesPersistedPayload(Payload, frozen=True, kw_only=True):
    files: Annotated[list[PersistedFile], Meta(description="The files the runtime stored.")]
    failed: Annotated[list[FailedFile] | UnsetType, Meta(description=(
        "The files it could not store; absent when none failed."))] = UNSET


class RuntimeWarningPayload(Payload, frozen=True, kw_only=True):
    message: Annotated[str, Meta(description=(
        "What canonflow or the runtime warns of, in one line (e.g. a native message no "
        "adapter knows yet, carried in the event's `raw`)."))]
    detail: Annotated[Any | UnsetType, Meta(description=(
        "More about it, in the runtime's own shape; absent when none."))] = UNSET


class RuntimeErrorPayload(Payload, frozen=True, kw_only=True):
    message: Annotated[str, Meta(description="The error, in the runtime's words.")]
    errorClass: Annotated[ErrorClass | UnsetType, Meta(description=(
        "What kind of error (the JSON key is `class`): provider_error, transport_error, "
        "permission_error, validation_error or unknown; absent when unclassified."))] = msgspec.field(default=UNSET, name="class")
    willRetry: Annotated[bool | UnsetType, Meta(description=(
        "True when the runtime says it retries on its own; absent when it does not say."))] = UNSET
    detail: Annotated[Any | UnsetType, Meta(description=(
        "The runtime's own error detail, in its shape; absent when none."))] = UNSET
