"""Error codes shared with the upstream implementation, and the one exception that carries them.

Tree (every class is a `StoryGraphError`, a `ToolError`, so its message reaches the model):

    StoryGraphError(code, message, field=None, next_step="")
      unsupported_mode        an `as_of` key or mode "as_of" (checked before anything else)
      invalid_arguments       schema violations, each problem listed
      scope_required          no scope given and the caller has no current project
      scope_unavailable       missing, inactive or outside the caller's grant: one answer for all
      invalid_cursor          tampered, foreign, truncated, or for another query
      stale_cursor            the scope's data changed since the first page
      object_not_found        get_context: no such object
      source_not_found        read_source: no such source reference
      scope_mismatch          the object/source exists but not in the requested scope
      source_version_required read_source version without source_version
      response_too_large      the response would exceed 100,000 bytes
      story_graph_unavailable switched off for this server or this client
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from mcp.server.mcpserver.exceptions import ToolError

from server.contracts.base import Contract

ErrorCode = Literal[
    "unsupported_mode",
    "invalid_arguments",
    "scope_required",
    "scope_unavailable",
    "invalid_cursor",
    "stale_cursor",
    "object_not_found",
    "source_not_found",
    "scope_mismatch",
    "source_version_required",
    "response_too_large",
    "story_graph_unavailable",
]
ERROR_CODES: tuple[str, ...] = get_args(ErrorCode)


class ErrorPayload(Contract):
    """The structured content of every error result."""

    error: ErrorCode
    """The machine-readable code; the text content starts with it and a colon."""
    message: str
    field: str | None = None
    """The offending argument, where there is one (dotted path)."""
    next_step: str
    """What to do next."""
    problems: list[dict[str, Any]] | None = None
    """For invalid_arguments: every problem found, each with `field` and `problem`."""


class StoryGraphError(ToolError):
    """A refusal the caller can act on. Raised, never returned; the tool layer shapes it."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        field: str | None = None,
        next_step: str = "",
        problems: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" + (f" {next_step}" if next_step else ""))
        self.payload = ErrorPayload(error=code, message=message, field=field, next_step=next_step, problems=problems)

    @property
    def code(self) -> str:
        return self.payload.error


def unsupported_mode() -> StoryGraphError:
    return StoryGraphError(
        "unsupported_mode",
        "as_of is not supported.",
        field="as_of",
        next_step="Use mode 'current' or 'timeline'; a timeline shows stored history, not what was known then.",
    )


def scope_unavailable(field: str = "scope") -> StoryGraphError:
    # One answer for missing, inactive and not granted, so nothing outside the grant leaks.
    return StoryGraphError(
        "scope_unavailable",
        "the requested scope does not exist, is inactive, or is not available to this client.",
        field=field,
        next_step="Omit scope to use the current project, or choose a scope this client may read.",
    )


def invalid_cursor(reason: str) -> StoryGraphError:
    return StoryGraphError(
        "invalid_cursor",
        reason,
        field="cursor",
        next_step="Pass next_cursor exactly as returned, with the same tool, filters and page sizes; or omit cursor.",
    )


def stale_cursor() -> StoryGraphError:
    return StoryGraphError(
        "stale_cursor",
        "stored evidence in this scope changed since the first page; pages from old and new data are never mixed.",
        field="cursor",
        next_step="Repeat the query without cursor to start over on the current data.",
    )


def story_graph_unavailable() -> StoryGraphError:
    return StoryGraphError(
        "story_graph_unavailable",
        "the story graph is switched off for this server or this client.",
        next_step="Answer from the current conversation; ask the operator to switch it on if needed.",
    )
