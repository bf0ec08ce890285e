"""Error codes shared with the upstream implementation, and the one exception that carries them.

An error reaches the client as an `isError` tool result with no `structuredContent` (TypeScript SDK
clients validate any structuredContent against the tool's outputSchema, even on errors, and then drop
the error). Its one text item starts with `<code>: `, says what to do, and ends with a line holding the
JSON payload (`ErrorPayload`) for programs: see `StoryGraphError.text`.

Codes (every one is raised as a `StoryGraphError`, a `ToolError`, so its message reaches the model):

    StoryGraphError(code, message, field=None, next_step="")
      unsupported_mode        an `as_of` key or mode "as_of" (checked before anything else)
      invalid_arguments       schema violations, each problem listed
      scope_required          no scope given and the caller has no current project
      scope_unavailable       missing, inactive or outside the caller's grant: one answer for all
      invalid_cursor          tampered, foreign, truncated, or for another query
      stale_cursor            what the pages read changed since the first page (the scope's data; get_context
                              `current`: or its memory items; read_source: the reference or its source)
      object_not_found        get_context: no such object
      source_not_found        read_source: no such source reference
      scope_mismatch          the object/source exists but not in the requested scope
      source_version_required read_source version without source_version
      response_too_large      the response would exceed 100,000 bytes
      story_graph_unavailable switched off for this server or this client
      read_failed             the database could not be read now (locked, corrupt, gone); nothing changed
      internal_error          a fault in this server (a bug), not in the call: logged with an incident id

`internal_error` is ours, not upstream's: the one code for what no other code describes, so that every error
text still starts with a code and says what to do (the SDK's own fallback is the bare exception text).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import orjson
from mcp.server.mcpserver.exceptions import ToolError

from server.contracts.base import Contract
from server.contracts.common import project_names

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
    "read_failed",
    "internal_error",
]
ERROR_CODES: tuple[str, ...] = get_args(ErrorCode)


class ErrorPayload(Contract):
    """The machine-readable part of every error, sent as JSON at the end of the error's text item."""

    error: ErrorCode
    """The machine-readable code; the text content starts with it and a colon."""
    message: str
    field: str | None = None
    """Every offending argument, where there is one (dotted paths, joined by ", " when there are several)."""
    next_step: str
    """What to do next."""
    problems: list[dict[str, Any]] | None = None
    """For invalid_arguments: every problem found, each with `field` and `problem`."""
    readable_scopes: list[dict[str, Any]] | None = None
    """For scope_required / scope_unavailable: scopes this caller's grant can read now (never others)."""
    readable_scope_count: int | None = None
    """How many readable scopes exist in all (readable_scopes lists the first ones)."""
    project_names: dict[str, str] | None = None
    """Beside readable_scopes: the stored name of each project they list, by id (as a response's `project_names`:
    each at most 256 code points, a longer one ending in '…'; the first that fit in 6,000 bytes of JSON)."""
    newest_versions: list[str] | None = None
    """For source_version_required: the newest stored versions of the reference's source (at most 5, newest first),
    each a value source_version accepts; empty when this scope can read no version of it."""
    available_version_count: int | None = None
    """For source_version_required: how many stored versions of the source this scope can read."""
    reference_version: str | None = None
    """For source_version_required: the version the reference was saved from, or 'unknown' when not recorded."""


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

    def text(self) -> str:
        """The error result's one text item: `<code>: <message> <next step>`, then the JSON payload alone on
        the last line, so a person (or model) reads the first line and a program parses the last."""
        return f"{self}\n{self.payload.model_dump_json(exclude_none=True)}"

    def naming_where_stored(
        self, what: str, stored_in: list[dict[str, Any]], names: dict[str, str], id_note: str | None = None
    ) -> StoryGraphError:
        """The same refusal (scope_required, scope_unavailable), its next step first naming the scopes `what` (the
        object or reference the call names) is stored in, so one call fixes it. `stored_in` must hold only scopes
        the caller may read; none: the refusal unchanged. `id_note` (`id_difference`): `what` names the stored id,
        which differs from the one sent, so the call is to be repeated with it. `names`: the projects' names by id
        (`project_names`), each said in parentheses after its scope."""
        if not stored_in:
            return self
        names = project_names(names)
        with_id = "that id and " if id_note else ""
        if len(stored_in) == 1:
            scope, named = _compact(stored_in[0]), named_scope(stored_in[0], names)
            fix = f'{what} is stored in scope {named}: call again with {with_id}"scope": {scope}.'
        else:
            scopes = " and ".join(named_scope(scope, names) for scope in stored_in)
            fix = f'{what} is stored in scopes {scopes}: call again with {with_id}"scope" set to one of them.'
        if id_note:
            fix = f"{id_note}: {fix}"
        return StoryGraphError(self.payload.error, self.payload.message, field=self.payload.field, next_step=fix)

    def with_readable_scopes(
        self, scopes: list[dict[str, Any]], total: int, names: dict[str, str], shared: dict[str, Any] | None = None
    ) -> StoryGraphError:
        """The same refusal, its next step naming the scopes the caller can read (from its grant only), each
        project's name in parentheses after its scope, and the payload carrying them (`project_names`). `shared`: a
        project set of them that holds data, the example of a set given (with its projects' names in `names`)."""
        names = project_names(names)
        if total == 0:
            hint = "This client can read no scope at all; ask the operator to grant one."
        else:
            listed = ", ".join(named_scope(scope, names) for scope in scopes)
            more = f" (and {total - len(scopes)} more)" if total > len(scopes) else ""
            hint = f"Scopes this client can read: {listed}{more}{_project_sets(scopes, names, shared)}."
        error = StoryGraphError(
            self.payload.error,
            self.payload.message,
            field=self.payload.field,
            next_step=f"{self.payload.next_step} {hint}",
            problems=self.payload.problems,
        )
        error.payload = error.payload.model_copy(
            update={"readable_scopes": scopes, "readable_scope_count": total, "project_names": names}
        )
        return error


def _compact(scope: dict[str, Any]) -> str:
    return orjson.dumps(scope).decode()


def named_scope(scope: dict[str, Any], names: dict[str, str]) -> str:
    """A scope as a sentence names it: its compact JSON (what the `scope` argument takes), then its projects' names
    in parentheses where `names` (capped: `project_names`) holds them: `{"kind":"projects","projectIds":["3f2a…"]}
    (Beacon)`. Project ids from an app are often UUIDs, which say nothing to an agent asked about "Beacon". A name's
    runs of whitespace (a line break included) are one space here: an error's text is its sentence on one line, then
    the JSON payload on the last (the payload's `project_names` keeps the name as stored)."""
    shown = [" ".join(names[pid].split()) for pid in scope.get("projectIds", []) if pid in names]
    return _compact(scope) + (f" ({', '.join(shown)})" if shown else "")


def _project_sets(readable: list[dict[str, Any]], names: dict[str, str], shared: dict[str, Any] | None) -> str:
    """The project-set hint, only for a caller that can read two projects or more (one project makes no set; a
    project set is its own scope, where work shared by its projects is stored), with an example it may pass: `shared`,
    a readable set holding data, when there is one (the first two readable projects, named before, often made a set
    holding nothing, where every search came back empty)."""
    projects = [p for scope in readable if scope.get("kind") == "projects" for p in scope.get("projectIds", [])]
    if len(projects) < 2:
        return ""
    hint = "; a project set of readable projects is a scope too (work they share is stored there)"
    return f"{hint}, e.g. {named_scope(shared, names)}" if shared is not None else f"{hint}, though none holds data now"


AS_OF_NEXT_STEPS: dict[str, str] = {
    "story_graph_search": "Remove as_of and search the stored graph as it is now; time_range with time_basis filters "
    "objects by their stored times, it does not rebuild an earlier state.",
    "story_graph_get_context": "Use mode 'current' or 'timeline'; a timeline shows stored history, not what was "
    "known then.",
    "story_graph_read_source": "Remove as_of; read the fragment saved with the reference (content_kind 'snapshot') "
    "or one stored version of the source (content_kind 'version' with source_version).",
}
"""What each tool offers instead of as_of: only get_context has modes, only read_source reads a stored version."""


def unsupported_mode(field: str = "as_of", tool: str = "story_graph_get_context") -> StoryGraphError:
    return StoryGraphError(
        "unsupported_mode",
        "as_of is not supported.",
        field=field,
        next_step=AS_OF_NEXT_STEPS.get(tool, AS_OF_NEXT_STEPS["story_graph_get_context"]),
    )


def scope_required(allow_global: bool) -> StoryGraphError:
    return StoryGraphError(
        "scope_required",
        "there is no current project for this caller, and no scope was given.",
        field="scope",
        # Global is named only to a caller that may read it: an example it would be refused is no help.
        next_step='Pass scope explicitly, e.g. {"kind":"projects","projectIds":["<id>"]}'
        + (' or {"kind":"global"}.' if allow_global else "."),
    )


def scope_unavailable(field: str = "scope", *, omit_reads_current_project: bool = False) -> StoryGraphError:
    """One answer for missing, inactive and not granted, so nothing outside the grant leaks. `omit_reads_current_
    project`: a call without scope (and without cursor) would read the caller's current project, so saying to omit
    scope is a next step that works; a caller without a current project, or whose current project is what was
    refused, was sent round in a circle by it (omitted: scope_required, or this same refusal)."""
    omit = "Omit scope to use the current project, or choose" if omit_reads_current_project else "Choose"
    return StoryGraphError(
        "scope_unavailable",
        "the requested scope does not exist, is inactive, or is not available to this client.",
        field=field,
        next_step=f"{omit} a scope this client may read.",
    )


def stored_in_another_scope(what: str, scope: dict[str, Any], names: dict[str, str]) -> StoryGraphError:
    """The object or reference exists in another scope this caller may read: name it (and its projects' names,
    `names` by id), so one call fixes it (a scope the caller may not read gets object_not_found / source_not_found
    instead, so nothing leaks)."""
    return StoryGraphError(
        "scope_mismatch",
        f"{what} is not stored in the requested scope; it is stored in another scope you may read.",
        field="scope",
        next_step=f"Repeat with scope {named_scope(scope, project_names(names))}, or search in the requested scope "
        "for its own objects.",
    )


def id_difference(sent: str, stored: str) -> str | None:
    """How the stored id a refusal names differs from the id sent (None: it does not). Ids are exact (SPEC names no
    other matching, and upstream compares them with `=`), so a refusal names the stored one rather than reading it
    in place of the one sent."""
    if sent == stored:
        return None
    spaced = sent.strip() != sent
    if sent.strip() == stored:
        return "The id has whitespace around it"
    if spaced:
        return "The id has whitespace around it and differs in letter case (ids are exact)"
    return "The id differs in letter case (ids are exact)"


def object_not_found(
    object_type: str,
    object_id: str,
    other_type: str | None = None,
    other_scope: dict[str, Any] | None = None,
    stored_id: str | None = None,
    carrying: list[str] | None = None,
) -> StoryGraphError:
    """No such object the caller may read. `other_type`: the id (or `stored_id`, a near id: see `id_difference`) is
    stored as that type in the requested scope, or in `other_scope` (one the caller may read), so the
    next step is the one call that reads it. `carrying`: the source references of the requested scope saved from
    the source, message or task that the id names (a source id sent as a source reference's)."""
    next_step = (
        "Use an object_ref returned by story_graph_search in this scope (a query equal to an id finds the objects "
        "that carry it)."
    )
    if carrying:
        ref = _compact({"type": "source_reference", "id": carrying[0]})
        next_step = (
            f"That id names a source, message or task; the source references of this scope saved from it: "
            f"{', '.join(carrying)}. Call again with object_ref {ref} (or another of them), or read their text "
            "with story_graph_read_source."
        )
    if other_type is not None:
        ref = _compact({"type": other_type, "id": stored_id if stored_id is not None else object_id})
        where = f" and scope {_compact(other_scope)}" if other_scope is not None else ""
        stored = "That id" if stored_id is None else f"{id_difference(object_id, stored_id)}; {stored_id!r}"
        kind = f" with type {other_type}" if other_type != object_type else ""
        next_step = f"{stored} is stored{kind}: call again with object_ref {ref}{where}."
    return StoryGraphError(
        "object_not_found",
        f"no {object_type} with id {object_id!r} is stored in any scope this client may read.",
        field="object_ref",
        next_step=next_step,
    )


def invalid_cursor(reason: str, fields: list[str] | None = None) -> StoryGraphError:
    """`fields`: the arguments that differ from the request the cursor was issued for, named after the cursor."""
    return StoryGraphError(
        "invalid_cursor",
        reason,
        field=", ".join(["cursor", *(fields or [])]),
        next_step="Pass next_cursor exactly as returned, with the same tool and filters (page sizes may change); "
        "or omit cursor to start again.",
    )


def stale_cursor(what: str = "stored evidence in this scope") -> StoryGraphError:
    return StoryGraphError(
        "stale_cursor",
        f"{what} changed since the first page; pages from old and new data are never mixed.",
        field="cursor",
        next_step="Repeat the query without cursor to start over on the current data.",
    )


def story_graph_unavailable() -> StoryGraphError:
    return StoryGraphError(
        "story_graph_unavailable",
        "the story graph is switched off for this server or this client.",
        next_step="Answer from the current conversation; ask the operator to switch it on if needed.",
    )


def read_failed(reason: str) -> StoryGraphError:
    """The database could not be read right now; `reason` says which (locked, corrupt, gone)."""
    return StoryGraphError(
        "read_failed",
        f"the story graph database could not be read: {reason}. Nothing was changed.",
        next_step="Retrying later is safe; if it keeps failing, tell the operator (the server log has the detail).",
    )


def internal_error(incident: str) -> StoryGraphError:
    """A fault in the server itself; the log holds the traceback under `incident`. Nothing internal is sent."""
    return StoryGraphError(
        "internal_error",
        f"the server failed on this call (incident {incident}); it is a fault in the server, not in the arguments, "
        "and nothing was changed.",
        next_step="Other calls still work; this one will likely fail again the same way. Tell the operator the "
        "incident id (the server log has the detail).",
    )
