"""The policy file: who may read what, and the on/off switches. Re-read whenever it changes, no restart.

Format (TOML; keys optional unless marked; unknown keys are refused; write it atomically, e.g. rename a temp file)::

    version = 1                  # required: the format version (only 1 exists)
    enabled = true               # the server switch: false turns the tools off for every client and stdio

    [stdio]                      # the caller on stdio (launched by an agent runtime)
    enabled = true
    default_project = "atlas"    # --project on the command line takes precedence
    projects = "*"               # "*" (every project) or a list of project ids
    allow_global = true

    [clients.research-agent]     # one HTTP client; the key is its client id
    token_sha256 = ["<64 hex>"]  # required: sha256 of each accepted bearer token (several while rotating)
    projects = ["atlas"]         # required: "*" or a list of project ids
    default_project = "atlas"
    allow_global = false
    enabled = true               # omit for "on"; false switches this client off without erasing its grant

Switches: the server switch overrides every client grant without erasing them; a client (or stdio) with
no `enabled` of its own is on. A file that cannot be read or parsed after start-up switches the tools off
for everyone (fail closed) until it is fixed; bearer tokens keep authenticating against the last good file
so clients see `story_graph_unavailable`, not 401. Reading the policy never writes anything.
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import os
import secrets
import sys
import time
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Final, Literal, Protocol

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator
from pydantic_core import ErrorDetails

from server.contracts.common import Grant
from server.contracts.errors import story_graph_unavailable
from server.store.errors import StoreError
from server.store.stdout import print_out

log = logging.getLogger("story_graph_mcp.policy")

TokenHash = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
ClientId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
ProjectId = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Projects = Literal["*"] | Annotated[list[ProjectId], Field(min_length=1)]

RACY_WINDOW_NS = 2_000_000_000
"""A file modified this recently may change again within the file system's timestamp granularity without
its mtime or size changing, so its content is hashed on every check until it is older than this."""


class PolicyError(StoreError):
    """The policy file is missing or invalid at start-up: one clear line, non-zero exit."""


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class _GrantFields(_Strict):
    default_project: ProjectId | None = None
    """The client's current project: the scope of a call that names none."""

    @model_validator(mode="after")
    def _default_in_grant(self) -> _GrantFields:
        projects: Projects = getattr(self, "projects", "*")
        if self.default_project is not None and projects != "*" and self.default_project not in projects:
            raise ValueError(f"default_project {self.default_project!r} is not in projects")
        return self


class StdioPolicy(_GrantFields):
    """The grant of the stdio caller (the operator launched it, so by default it may read everything)."""

    enabled: bool = True
    projects: Projects = "*"
    allow_global: bool = True


class ClientPolicy(_GrantFields):
    """One HTTP client: its tokens (hashed), what it may read, and its own switch."""

    token_sha256: list[TokenHash]
    projects: Projects
    allow_global: bool = False
    enabled: bool = True


class Policy(_Strict):
    version: Literal[1]
    """Required, so an empty or truncated file is refused rather than read as "no clients"."""
    enabled: bool = True
    """The server switch."""
    stdio: StdioPolicy = StdioPolicy()
    clients: dict[ClientId, ClientPolicy] = {}

    @model_validator(mode="after")
    def _tokens_unique(self) -> Policy:
        seen: dict[str, str] = {}
        for client_id, client in self.clients.items():
            for digest in client.token_sha256:
                other = seen.setdefault(digest, client_id)
                if other != client_id or client.token_sha256.count(digest) > 1:
                    raise ValueError(f"a token hash of client {client_id!r} is listed twice (also for {other!r})")
        return self

    def client_for_token(self, digest: str) -> str | None:
        return self._clients_by_token.get(digest)

    @cached_property
    def _clients_by_token(self) -> dict[str, str]:
        """Token hash -> client id, built once per parsed policy (a request looks it up, never scans)."""
        return {digest: client_id for client_id, client in self.clients.items() for digest in client.token_sha256}


def hash_token(token: str) -> str:
    """The form a bearer token is stored in: sha256 of its UTF-8 bytes, lowercase hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return "sgm_" + secrets.token_urlsafe(32)


def parse_policy(text: bytes, origin: str) -> Policy:
    """Parse and validate; errors name the place and the problem, never the offending value (it may be a token)."""
    try:
        # utf-8-sig: a byte-order mark (Notepad, PowerShell's Out-File) is not part of the text; as TOML it read
        # "not valid TOML (Invalid statement (at line 1, column 1))" for a file that looks right in any editor.
        data = tomllib.loads(text.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise PolicyError(f"{origin}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{origin}: not valid TOML ({exc})") from None
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or '(file)'}: {_policy_problem(err)}"
            for err in exc.errors(include_url=False, include_input=False, include_context=False)
        )
        raise PolicyError(f"{origin}: invalid policy: {problems}") from None


NOT_A_TOKEN_HASH: Final = (
    "not a token hash: list the sha256 of each token, 64 lowercase hex digits, as `policy new-token` and"
    " `policy hash-token` print it, never the token itself"
)


def _policy_problem(err: ErrorDetails) -> str:
    """pydantic's message, except where it would only quote a regular expression: a token pasted into
    token_sha256 (the likeliest slip) read `String should match pattern '^[0-9a-f]{64}$'`."""
    if err["type"] == "string_pattern_mismatch" and "token_sha256" in err["loc"]:
        return NOT_A_TOKEN_HASH
    return err["msg"]


class PolicySource(Protocol):
    def current(self) -> Policy | None:
        """The policy in force now, re-read if it changed; None while the file is unreadable or invalid."""
        ...

    def last_good(self) -> Policy:
        """The last valid policy (used only to authenticate tokens while the file is broken)."""
        ...

    def broken(self) -> bool:
        """True while the file is unreadable or invalid (every tool switched off by a fault, not by a switch)."""
        ...


@dataclass(frozen=True)
class FixedPolicy:
    """A policy held in memory (the generated one-run token of `serve --transport http` without --policy)."""

    policy: Policy

    def current(self) -> Policy:
        return self.policy

    def last_good(self) -> Policy:
        return self.policy

    def broken(self) -> bool:
        return False


class PolicyFile:
    """A policy file, checked on every use: a stat, and a re-read when its identity, size or mtime changed
    (or while it is too fresh to trust its mtime); re-parsed only when the content hash changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            stat = path.stat()
            text = path.read_bytes()
        except OSError as exc:
            raise PolicyError(f"cannot read the policy file {path}: {exc.strerror}") from None
        self._good = parse_policy(text, str(path))
        self._current: Policy | None = self._good
        self._signature = _signature(stat)
        self._digest = hashlib.sha256(text).digest()

    def current(self) -> Policy | None:
        self._refresh()
        return self._current

    def last_good(self) -> Policy:
        self._refresh()
        return self._good

    def broken(self) -> bool:
        return self.current() is None

    def _refresh(self) -> None:
        try:
            stat = self.path.stat()
        except OSError as exc:
            self._broken(b"", f"cannot read the policy file {self.path}: {exc.strerror}")
            return
        signature = _signature(stat)
        if signature == self._signature and time.time_ns() - stat.st_mtime_ns > RACY_WINDOW_NS:
            return
        try:
            text = self.path.read_bytes()
        except OSError as exc:
            self._broken(b"", f"cannot read the policy file {self.path}: {exc.strerror}")
            return
        self._signature = signature
        digest = hashlib.sha256(text).digest()
        if digest == self._digest:
            return
        self._digest = digest
        try:
            policy = parse_policy(text, str(self.path))
        except PolicyError as exc:
            self._broken(digest, str(exc))
            return
        self._good = self._current = policy
        log.warning("policy reloaded from %s: %s", self.path, describe(policy))

    def _broken(self, digest: bytes, reason: str) -> None:
        if self._current is not None or digest != self._digest:
            log.error("%s; the story graph tools are switched off until the policy file is fixed", reason)
        self._current = None
        self._digest = digest
        self._signature = None


def granted_projects(policy: Policy) -> dict[str, list[str]]:
    """The project ids each grant names (its list and its default project), by holder: `[stdio]` and each client."""
    holders: dict[str, StdioPolicy | ClientPolicy] = {"[stdio]": policy.stdio}
    holders.update({f"client {client_id!r}": client for client_id, client in policy.clients.items()})
    named: dict[str, list[str]] = {}
    for holder, spec in holders.items():
        ids = set() if spec.projects == "*" else set(spec.projects)
        ids.update([spec.default_project] if spec.default_project else [])
        if ids:
            named[holder] = sorted(ids)
    return named


def describe(policy: Policy) -> str:
    """A one-line summary of the switches (never tokens or hashes)."""
    off = sorted(client_id for client_id, client in policy.clients.items() if not client.enabled)
    return (
        f"server {'on' if policy.enabled else 'OFF'}, stdio {'on' if policy.stdio.enabled else 'OFF'}, "
        f"{len(policy.clients)} client(s)" + (f", switched off: {', '.join(off)}" if off else "")
    )


def _signature(stat: os.stat_result) -> tuple[int, int, int, int] | None:
    return (stat.st_ino, stat.st_dev, stat.st_size, stat.st_mtime_ns)


def _grant(client_id: str, spec: StdioPolicy | ClientPolicy, default_project: str | None) -> Grant:
    return Grant(
        client_id=client_id,
        enabled=True,
        default_project=default_project,
        projects=spec.projects if spec.projects == "*" else list(spec.projects),
        allow_global=spec.allow_global,
    )


STDIO_CALLER = "stdio"
"""The name of the one caller on stdio (there is no token): its grant's client id and its name in the log."""


@dataclass(frozen=True)
class StdioPolicyAccess:
    """`Access` for stdio (and in-process clients): the policy's server switch and its `[stdio]` grant."""

    source: PolicySource
    project: str | None = None
    """--project from the command line: overrides `stdio.default_project`."""
    fallback_project: str | None = None
    """Used when neither --project nor `stdio.default_project` is set (the demo's main project)."""

    def current_grant(self) -> Grant:
        policy = self.source.current()
        if policy is None or not policy.enabled or not policy.stdio.enabled:
            raise story_graph_unavailable()
        stdio = policy.stdio
        return _grant(STDIO_CALLER, stdio, self.project or stdio.default_project or self.fallback_project)

    def caller(self) -> str:
        return STDIO_CALLER


@dataclass(frozen=True)
class HttpPolicyAccess:
    """`Access` for HTTP: the grant of the client the request's bearer token belongs to (never from arguments)."""

    source: PolicySource

    def current_grant(self) -> Grant:
        token = get_access_token()
        policy = self.source.current()
        if token is None or policy is None or not policy.enabled:
            raise story_graph_unavailable()
        client = policy.clients.get(token.client_id)
        if client is None or not client.enabled:
            raise story_graph_unavailable()
        return _grant(token.client_id, client, client.default_project)

    def caller(self) -> str | None:
        token = get_access_token()
        return token.client_id if token is not None else None


@dataclass(frozen=True)
class PolicyTokenVerifier:
    """The SDK's `TokenVerifier` hook: a bearer token is valid when its sha256 is listed for a client."""

    source: PolicySource

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = hash_token(token)
        client_id = self.source.last_good().client_for_token(digest)
        if client_id is None:
            return None
        # Only the digest is kept in the request context; the raw token goes no further.
        return AccessToken(token=digest, client_id=client_id, scopes=[], subject=client_id)


def one_run_policy(project: str | None) -> tuple[Policy, str]:
    """A policy with one client that may read everything, and its freshly made token (shown once, never stored)."""
    token = new_token()
    client = ClientPolicy(token_sha256=[hash_token(token)], projects="*", allow_global=True, default_project=project)
    return Policy(version=1, clients={"operator": client}), token


def _token_input() -> str:
    """The token to hash: all of stdin from a pipe; on a terminal one line, asked for and not echoed (a bare
    `policy hash-token` used to wait silently for end of input, with the token shown as it was typed)."""
    if not sys.stdin.isatty():
        return sys.stdin.read()
    try:
        return getpass.getpass("token to hash (input hidden; Enter to finish): ", stream=sys.stderr)
    except EOFError:  # Ctrl-D: nothing was given
        return ""


def policy_command(command: str, path: Path | None, db: Path | None = None) -> int:
    """`story-graph-mcp policy new-token | hash-token | check FILE [--db DB]`."""
    if command == "new-token":
        token = new_token()
        print_out(f"token (give it to the client; it is not stored anywhere): {token}")
        print_out(f'token_sha256 = ["{hash_token(token)}"]')
        return 0
    if command == "hash-token":
        # Read from stdin so the token stays out of shell history and the process list.
        lines = [line.strip() for line in _token_input().splitlines() if line.strip()]
        if len(lines) != 1:
            got = "nothing" if not lines else f"{len(lines)} non-empty lines"
            raise PolicyError(f"hash-token reads one token from stdin; got {got} (hash one token per run)")
        print_out(hash_token(lines[0]))
        return 0
    assert path is not None
    policy = PolicyFile(path).last_good()
    from server.settings import check_database_file, policy_warnings  # the database is read only with --db

    if db is not None:
        check_database_file(db)  # missing, not a database, wrong schema: one line, as for `serve`
    warnings = policy_warnings(policy, db) if db is not None else []
    print_out(
        f"{path}: valid policy; {describe(policy)}"
        + "".join(
            f"\n  {cid}: {'on' if c.enabled else 'OFF'}, {len(c.token_sha256)} token(s), projects "
            f"{c.projects if c.projects == '*' else ','.join(c.projects)}, global {'yes' if c.allow_global else 'no'}"
            for cid, c in policy.clients.items()
        )
    )
    for warning in warnings:
        print_out(f"warning: {warning}")
    return 1 if warnings else 0
