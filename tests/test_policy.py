"""The policy file: its strict format, re-reading on change, the switches, the token hook and the CLI helpers.

Switch behaviour is checked through a real in-process MCP client; HTTP clients are in test_http.py and the
same scenarios over every transport in test_transports.py.
"""

from __future__ import annotations

import hashlib
import io
import os
import pty
import select
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from http_support import TOKENS, policy_text, stdio_session
from mcp import Client
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from pydantic import BaseModel
from support import demo_db, error, ok
from test_serve_startup import serve_once

from server.app import StoryGraphServer
from server.cli import main
from server.contracts.base import Contract
from server.contracts.errors import StoryGraphError
from server.policy import (
    FixedPolicy,
    HttpPolicyAccess,
    PolicyError,
    PolicyFile,
    PolicyTokenVerifier,
    StdioPolicyAccess,
    hash_token,
    new_token,
    one_run_policy,
    parse_policy,
)
from server.reader.cursor import CursorCodec
from server.tools import TOOLS
from server.tools.base import Call, ToolSpec

pytestmark = pytest.mark.anyio

STORY_TOOLS = {spec.name for spec in TOOLS}


def write(path: Path, text: str) -> Path:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def both_clients(**top: Any) -> str:
    return policy_text(
        clients={
            "alpha": {"projects": ["atlas"], "default_project": "atlas"},
            "beta": {"projects": "*", "allow_global": True},
        },
        **top,
    )


# ---------------------------------------------------------------- format


def test_defaults_and_a_full_policy() -> None:
    minimal = parse_policy(b"version = 1\n", "p")
    assert minimal.enabled and minimal.stdio.enabled and minimal.stdio.projects == "*" and minimal.clients == {}
    full = parse_policy(both_clients(enabled=False, stdio={"default_project": "beacon"}).encode(), "p")
    assert not full.enabled
    assert full.stdio.default_project == "beacon"
    alpha = full.clients["alpha"]
    assert alpha.enabled and alpha.projects == ["atlas"] and alpha.allow_global is False
    assert full.client_for_token(hash_token(TOKENS["beta"])) == "beta"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "version"),
        ("version = 2\n", "version"),
        ("version = 1\nenable = false\n", "enable"),
        ('version = 1\nenabled = "no"\n', "enabled"),
        ('version = 1\n[clients.a]\nprojects = "*"\n', "token_sha256"),
        ('version = 1\n[clients.a]\ntoken_sha256 = ["abc"]\nprojects = "*"\n', "token_sha256"),
        (f'version = 1\n[clients.a]\ntoken_sha256 = ["{"0" * 64}"]\n', "projects"),
        (f'version = 1\n[clients.a]\ntoken_sha256 = ["{"0" * 64}"]\nprojects = []\n', "projects"),
        (f'version = 1\n[clients."a b"]\ntoken_sha256 = ["{"0" * 64}"]\nprojects = "*"\n', "clients"),
        (
            f'version = 1\n[clients.a]\ntoken_sha256 = ["{"0" * 64}"]\nprojects = ["atlas"]\ndefault_project = "x"\n',
            "default_project 'x' is not in projects",
        ),
        (
            f'version = 1\n[clients.a]\ntoken_sha256 = ["{"0" * 64}"]\nprojects = "*"\n'
            f'[clients.b]\ntoken_sha256 = ["{"0" * 64}"]\nprojects = "*"\n',
            "listed twice",
        ),
        ("version = 1\n[stdio\n", "not valid TOML"),
    ],
)
def test_invalid_policies_are_refused_with_the_place(text: str, problem: str) -> None:
    with pytest.raises(PolicyError, match=r"invalid policy|not valid TOML") as exc:
        parse_policy(text.encode(), "policy.toml")
    assert problem in str(exc.value)
    assert str(exc.value).startswith("policy.toml: ")


def test_an_error_never_repeats_the_offending_value() -> None:
    """Someone pastes the raw token instead of its hash: the message must not echo it."""
    raw = TOKENS["alpha"]
    text = f'version = 1\n[clients.a]\ntoken_sha256 = ["{raw}"]\nprojects = "*"\n'
    with pytest.raises(PolicyError) as exc:
        parse_policy(text.encode(), "p")
    assert raw not in str(exc.value) and "token_sha256" in str(exc.value)


def test_token_hash_is_sha256_hex() -> None:
    assert hash_token("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_missing_policy_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read the policy file"):
        PolicyFile(tmp_path / "nope.toml")


# ---------------------------------------------------------------- re-reading and switches


def test_changes_apply_without_restart_even_within_one_mtime_tick(tmp_path: Path) -> None:
    """Same inode, same size, same mtime: only the content differs (a fast editor, a coarse file system clock)."""
    on, off = "version = 1\nenabled = true \n", "version = 1\nenabled = false\n"
    path = tmp_path / "policy.toml"
    path.write_text(on)
    access = StdioPolicyAccess(PolicyFile(path), project="atlas")
    assert access.current_grant().default_project == "atlas"
    stat = path.stat()
    for text, is_on in ((off, False), (on, True)):
        path.write_text(text)  # in place
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        now = path.stat()
        assert (now.st_ino, now.st_size, now.st_mtime_ns) == (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if is_on:
            assert access.current_grant().client_id == "stdio"
        else:
            with pytest.raises(StoryGraphError, match="story_graph_unavailable"):
                access.current_grant()


def test_server_switch_overrides_clients_without_erasing_them(tmp_path: Path) -> None:
    path = write(tmp_path / "policy.toml", both_clients())
    source = PolicyFile(path)
    access = HttpPolicyAccess(source)
    with as_client("alpha"):
        before = access.current_grant()
        write(path, both_clients(enabled=False))
        with pytest.raises(StoryGraphError, match="story_graph_unavailable"):
            access.current_grant()
        write(path, both_clients(enabled=True))
        assert access.current_grant() == before
    assert before.projects == ["atlas"] and before.default_project == "atlas" and not before.allow_global


def test_one_client_off_leaves_the_others_on(tmp_path: Path) -> None:
    text = both_clients().replace('default_project = "atlas"', 'default_project = "atlas"\nenabled = false')
    access = HttpPolicyAccess(PolicyFile(write(tmp_path / "policy.toml", text)))
    with as_client("alpha"), pytest.raises(StoryGraphError, match="story_graph_unavailable"):
        access.current_grant()
    with as_client("beta"):
        grant = access.current_grant()
    assert grant.client_id == "beta" and grant.projects == "*" and grant.allow_global


def test_http_access_needs_a_token_and_a_known_client(tmp_path: Path) -> None:
    access = HttpPolicyAccess(PolicyFile(write(tmp_path / "policy.toml", both_clients())))
    with pytest.raises(StoryGraphError, match="story_graph_unavailable"):
        access.current_grant()  # no authenticated request: never falls back to some default grant
    with as_client("removed-client"), pytest.raises(StoryGraphError, match="story_graph_unavailable"):
        access.current_grant()


def test_a_broken_file_fails_closed_and_tokens_keep_authenticating(tmp_path: Path) -> None:
    path = write(tmp_path / "policy.toml", both_clients())
    source = PolicyFile(path)
    access = HttpPolicyAccess(source)
    for broken in ("version = 1\n[clients\n", ""):  # a typo; a truncated (empty) file
        write(path, broken)
        with as_client("alpha"), pytest.raises(StoryGraphError, match="story_graph_unavailable"):
            access.current_grant()
        with pytest.raises(StoryGraphError, match="story_graph_unavailable"):
            StdioPolicyAccess(source).current_grant()
    path.unlink()
    with pytest.raises(StoryGraphError, match="story_graph_unavailable"):
        StdioPolicyAccess(source).current_grant()
    write(path, both_clients())
    with as_client("alpha"):
        assert access.current_grant().client_id == "alpha"


async def test_token_verifier_accepts_listed_tokens_only(tmp_path: Path) -> None:
    path = write(tmp_path / "policy.toml", both_clients())
    verifier = PolicyTokenVerifier(PolicyFile(path))
    token = await verifier.verify_token(TOKENS["alpha"])
    assert token is not None and token.client_id == "alpha"
    assert token.token != TOKENS["alpha"], "the raw token is not kept in the request context"
    assert await verifier.verify_token("sgm_not-a-listed-token") is None
    assert await verifier.verify_token(hash_token(TOKENS["alpha"])) is None, "the hash itself is not a token"
    # rotation: a second token for alpha, then the old one removed, without a restart
    new = "sgm_rotated-token-for-alpha-22222"
    rotated = both_clients().replace(hash_token(TOKENS["alpha"]), hash_token(new))
    write(path, rotated)
    assert await verifier.verify_token(TOKENS["alpha"]) is None
    fresh = await verifier.verify_token(new)
    assert fresh is not None and fresh.client_id == "alpha"


async def test_broken_file_keeps_last_good_tokens(tmp_path: Path) -> None:
    path = write(tmp_path / "policy.toml", both_clients())
    verifier = PolicyTokenVerifier(PolicyFile(path))
    write(path, "version = 1\n[clients\n")
    token = await verifier.verify_token(TOKENS["beta"])
    assert token is not None and token.client_id == "beta"


def test_stdio_grant_and_project_precedence(tmp_path: Path) -> None:
    path = write(tmp_path / "policy.toml", policy_text(stdio={"default_project": "beacon", "projects": ["beacon"]}))
    source = PolicyFile(path)
    assert StdioPolicyAccess(source).current_grant().default_project == "beacon"
    assert StdioPolicyAccess(source, project="atlas").current_grant().default_project == "atlas"
    assert StdioPolicyAccess(source, fallback_project="atlas").current_grant().default_project == "beacon"
    grant = StdioPolicyAccess(source).current_grant()
    assert grant.projects == ["beacon"] and grant.allow_global
    open_policy = write(tmp_path / "open.toml", "version = 1\n")
    assert StdioPolicyAccess(PolicyFile(open_policy), fallback_project="atlas").current_grant().default_project == (
        "atlas"
    )


def test_one_run_policy_makes_a_fresh_token_each_time() -> None:
    first, token = one_run_policy("atlas")
    second, other = one_run_policy("atlas")
    assert token != other and token.startswith("sgm_") and len(token) > 40
    assert first.client_for_token(hash_token(token)) == "operator"
    assert second.client_for_token(hash_token(token)) is None
    assert FixedPolicy(first).current() is first


class as_client:
    """Run code as if an HTTP request authenticated as this client (what the SDK's auth middleware sets)."""

    def __init__(self, client_id: str) -> None:
        self.user = AuthenticatedUser(AccessToken(token="x", client_id=client_id, scopes=[]))

    def __enter__(self) -> None:
        self.reset = auth_context_var.set(self.user)

    def __exit__(self, *_: object) -> None:
        auth_context_var.reset(self.reset)


# ---------------------------------------------------------------- through a real MCP client


def policy_server(db: Path, policy: Path, tools: tuple[ToolSpec, ...] = TOOLS) -> StoryGraphServer:
    access = StdioPolicyAccess(PolicyFile(policy), project="atlas")
    return StoryGraphServer(db, access, CursorCodec(b"policy-test-secret-0123456789"), tools)


async def listed(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools} & STORY_TOOLS


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_switches_through_a_client_session(tmp_path: Path, mode: str) -> None:
    db = demo_db(tmp_path)
    path = write(tmp_path / "policy.toml", "version = 1\n")
    async with Client(policy_server(db, path), mode=mode, raise_exceptions=mode != "legacy") as client:
        assert await listed(client) == STORY_TOOLS
        for off in ("version = 1\nenabled = false\n", "version = 1\n[stdio]\nenabled = false\n", "garbage ["):
            write(path, off)
            assert await listed(client) == set()
            payload = await error(client, "story_graph_search", {"query": "cache"})
            assert payload["error"] == "story_graph_unavailable"
            write(path, "version = 1\n")
            assert await listed(client) == STORY_TOOLS
            await ok(client, "story_graph_search", {"query": "cache"})


class _Empty(Contract):
    pass


class _Done(BaseModel):
    done: bool


async def test_a_response_in_flight_rechecks_the_switches(tmp_path: Path) -> None:
    """The switch turns off while a call is reading: its answer is withheld, not delivered."""
    db = demo_db(tmp_path)
    path = write(tmp_path / "policy.toml", "version = 1\n")

    async def switch_off_midway(call: Call, _: Any) -> BaseModel:
        assert call.grant.client_id == "stdio"
        write(path, "version = 1\nenabled = false\n")
        return _Done(done=True)

    slow = ToolSpec(
        "slow_read", "Slow read", "Switches the server off while it runs.", _Empty, _Done, switch_off_midway
    )
    async with Client(policy_server(db, path, (slow,))) as client:
        payload = await error(client, "slow_read", {})
        assert payload["error"] == "story_graph_unavailable"
        write(path, "version = 1\n")
        result = await client.call_tool("slow_read", {})
        assert result.is_error  # it switched off again before answering


def fingerprint(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}


def graph_revision(db: Path) -> Any:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT data_revision FROM graph_state").fetchone()


async def test_switching_on_writes_nothing(tmp_path: Path) -> None:
    db = demo_db(tmp_path)
    path = write(tmp_path / "policy.toml", "version = 1\nenabled = false\n")
    before, revision = fingerprint(tmp_path), graph_revision(db)
    async with Client(policy_server(db, path)) as client:
        assert await listed(client) == set()
        write(path, "version = 1\n")
        assert await listed(client) == STORY_TOOLS
        await ok(client, "story_graph_search", {"query": "cache"})
    after = fingerprint(tmp_path)
    assert after.pop("policy.toml") != before.pop("policy.toml")
    # SQLite readers of a WAL database create the -wal/-shm coordination files; no frame may be written.
    empty = hashlib.sha256(b"").hexdigest()
    assert after.pop("demo.db-wal", empty) == empty
    after.pop("demo.db-shm", None)
    assert after == before
    assert graph_revision(db) == revision


# ---------------------------------------------------------------- CLI helpers


def test_cli_new_token_hash_token_and_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["policy", "new-token"]) == 0
    lines = capsys.readouterr().out.splitlines()
    token = lines[0].rsplit(" ", 1)[-1]
    assert lines[1] == f'token_sha256 = ["{hash_token(token)}"]'

    monkeypatch.setattr("sys.stdin", io.StringIO(token + "\n"))
    assert main(["policy", "hash-token"]) == 0
    assert capsys.readouterr().out.strip() == hash_token(token)
    # one token per run: a second line is refused, not silently left unhashed
    for text, got in ((f"{token}\nsgm_second\n", "got 2 non-empty lines"), ("\n \n", "got nothing")):
        monkeypatch.setattr("sys.stdin", io.StringIO(text))
        assert main(["policy", "hash-token"]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and got in captured.err and token not in captured.err

    path = write(tmp_path / "policy.toml", both_clients(enabled=False))
    assert main(["policy", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "valid policy; server OFF" in out and "alpha: on" in out and hash_token(TOKENS["alpha"]) not in out

    write(path, "version = 1\n[clients.x]\n")
    assert main(["policy", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("story-graph-mcp: ") and "token_sha256" in err and len(err.splitlines()) == 1


def test_serve_with_a_bad_policy_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = demo_db(tmp_path)
    path = write(tmp_path / "policy.toml", "version = 1\nenabled = maybe\n")
    assert main(["serve", "--db", str(db), "--policy", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("story-graph-mcp: ") and "not valid TOML" in err and len(err.splitlines()) == 1


def test_a_granted_project_the_database_does_not_hold_is_named_by_check_and_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = demo_db(tmp_path)
    typo = policy_text(
        stdio={"default_project": "legacy"},
        clients={"alpha": {"projects": ["atlas", "atlsa"]}, "beta": {"projects": "*", "allow_global": True}},
    )
    path = write(tmp_path / "policy.toml", typo)
    assert main(["policy", "check", str(path), "--db", str(db)]) == 1
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: [stdio] is granted project 'legacy', which is inactive in {db}; calls for it are refused",
        f"warning: client 'alpha' is granted project 'atlsa', which is not in {db}; calls for it are refused",
    ]
    assert main(["policy", "check", str(path)]) == 0, "without --db the file alone is checked"
    capsys.readouterr()

    # serve says the same at start (and serves: an import may add the project later)
    said = served_stdio("--db", str(db), "--policy", str(path))
    assert "client 'alpha' is granted project 'atlsa', which is not in" in said

    write(path, both_clients())
    assert main(["policy", "check", str(path), "--db", str(db)]) == 0
    assert "warning" not in capsys.readouterr().out


async def test_a_refusal_on_stdio_names_the_stdio_caller_as_http_names_its_client(tmp_path: Path) -> None:
    """The stdio caller has a name (`stdio`, its grant's client id), switched off or not; it used to be logged
    as `-` once switched off (no grant, and no token to name it by), and as `local` without a policy."""
    db = demo_db(tmp_path)
    policy = write(tmp_path / "policy.toml", "version = 1\n[stdio]\nenabled = false\n")
    async with stdio_session(["--db", str(db), "--policy", str(policy)], tmp_path) as client:
        assert (await error(client, "story_graph_search", {"query": "cache"}))["error"] == "story_graph_unavailable"
    async with stdio_session(["--db", str(db), "--project", "atlas"], tmp_path) as client:
        nowhere = {"kind": "projects", "projectIds": ["nope"]}
        refused = await error(client, "story_graph_search", {"query": "cache", "scope": nowhere})
        assert refused["error"] == "scope_unavailable"
    log = (tmp_path / "stdio-server.log").read_text()
    assert "story_graph_search refused for stdio: story_graph_unavailable" in log, log
    assert "story_graph_search refused for stdio: scope_unavailable" in log, log


def test_check_with_a_database_that_is_missing_or_not_one_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy check FILE --db DB` with a DB path that is wrong: the line `serve` would give, not a traceback."""
    path = write(tmp_path / "policy.toml", both_clients())
    missing = tmp_path / "nothere.db"
    assert main(["policy", "check", str(path), "--db", str(missing)]) == 2
    assert capsys.readouterr().err.startswith(f"story-graph-mcp: {missing}: no such database file")
    (tmp_path / "notes.db").write_text("not a database")
    assert main(["policy", "check", str(path), "--db", str(tmp_path / "notes.db")]) == 2
    assert "is not a SQLite database" in capsys.readouterr().err
    assert not missing.exists()


def test_hash_token_on_a_terminal_asks_for_the_token_and_does_not_echo_it(tmp_path: Path) -> None:
    """A bare `policy hash-token` typed in a terminal waited silently for end of input (Ctrl-D), echoing the token."""
    token = "sgm_typed-at-a-terminal"
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the command with the terminal as its stdin, stdout and stderr
        os.execv(sys.executable, [sys.executable, "-m", "server", "policy", "hash-token"])
    shown = b""

    def read_until(wanted: bytes) -> None:
        nonlocal shown
        while wanted not in shown:
            ready, _, _ = select.select([terminal], [], [], 10)
            if not ready:  # the old command sat silent, waiting for end of input
                return
            try:
                chunk = os.read(terminal, 4096)
            except OSError:  # the child exited and closed the terminal
                return
            if not chunk:
                return
            shown += chunk

    try:
        read_until(b"token to hash (input hidden; Enter to finish): ")
        os.write(terminal, token.encode() + b"\r")
        read_until(hash_token(token).encode() + b"\r\n")
    finally:
        if os.waitpid(pid, os.WNOHANG) == (0, 0):
            time.sleep(1)
        if os.waitpid(pid, os.WNOHANG) == (0, 0):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(terminal)
    assert b"token to hash (input hidden; Enter to finish): " in shown
    assert hash_token(token).encode() in shown
    assert token.encode() not in shown


def test_a_token_pasted_where_its_hash_goes_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`token_sha256 = ["sgm_..."]` (the token instead of its hash) said only `String should match pattern
    '^[0-9a-f]{64}$'`."""
    token = new_token()
    path = write(tmp_path / "policy.toml", f'version = 1\n[clients.x]\ntoken_sha256 = ["{token}"]\nprojects = "*"\n')
    assert main(["policy", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"story-graph-mcp: {path}: invalid policy: clients.x.token_sha256.0: not a token hash: list the sha256 of each"
        " token, 64 lowercase hex digits, as `policy new-token` and `policy hash-token` print it, never the token"
        " itself\n"
    )


def test_a_policy_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A BOM (Notepad, PowerShell's Out-File -Encoding utf8) made a valid file `not valid TOML (Invalid statement (at
    line 1, column 1))`, a line an operator cannot see in the file."""
    path = tmp_path / "policy.toml"
    path.write_bytes(b"\xef\xbb\xbf" + both_clients().encode())
    assert main(["policy", "check", str(path)]) == 0
    assert "valid policy; server on" in capsys.readouterr().out


def served_stdio(*args: str) -> str:
    """What `serve ARGS` on stdio says on stderr, started with empty input (it serves, then ends)."""
    served = serve_once(*args)
    assert served.returncode == 0, served.stderr
    return served.stderr


def test_a_stdio_current_project_outside_the_stdio_grant_is_named_at_start(tmp_path: Path) -> None:
    """`serve --project atlas --policy P` with `[stdio] projects = ["beacon"]` started silently, and then refused
    every call that named no scope with scope_unavailable: the contradiction is logged once at start."""
    db = demo_db(tmp_path)
    path = write(tmp_path / "policy.toml", 'version = 1\n[stdio]\nprojects = ["beacon"]\n')

    def started(*args: str) -> str:
        return served_stdio(*args, "--policy", str(path))

    said = "is not in [stdio] projects (beacon): a call that names no scope is refused with scope_unavailable"
    assert f"the current project 'atlas' (--project) {said}" in started("--db", str(db), "--project", "atlas")
    assert f"the current project 'atlas' (the demo's default project) {said}" in started("--demo")
    assert "[stdio] projects" not in started("--db", str(db), "--project", "beacon")
    assert "[stdio] projects" not in started("--db", str(db))
