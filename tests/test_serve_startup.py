"""Bad start-up states give one clear line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import argparse
import os
import pty
import select
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from server.store.migrate import SCHEMA_VERSION, migrate


def serve_once(*args: str) -> subprocess.CompletedProcess[str]:
    """`serve ARGS` started with empty input (on stdio it serves, then ends), its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "server", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _newer(tmp_path: Path) -> Path:
    path = tmp_path / "newer.db"
    migrate(path)
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    return path


def _missing(tmp_path: Path) -> Path:
    return tmp_path / "missing.db"


def _not_sqlite(tmp_path: Path) -> Path:
    path = tmp_path / "text.db"
    path.write_text("hello, not sqlite " * 100, encoding="utf-8")
    return path


def _directory(tmp_path: Path) -> Path:
    """`serve --db /srv/graphs` (the folder, not the file) ended in a traceback: `disk I/O error`."""
    return tmp_path


def _older(tmp_path: Path) -> Path:
    path = tmp_path / "older.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("PRAGMA user_version = 1")
    return path


def _empty(tmp_path: Path) -> Path:
    """SQLite reads an empty file as an empty database: "run db migrate" fits, but so may a copy that failed."""
    path = tmp_path / "empty.db"
    path.touch()
    return path


def _cut_short(tmp_path: Path) -> Path:
    """A copy that stopped inside the first page: SQLite read it as an empty database, and `serve` said to run
    `db migrate`, which then failed with `database disk image is malformed`."""
    path = tmp_path / "short.db"
    migrate(path)
    path.write_bytes(path.read_bytes()[:50])
    return path


def _another_applications(tmp_path: Path) -> Path:
    """Another application's SQLite file: `serve` said to run `db migrate`, which refuses a file holding tables."""
    path = tmp_path / "notes.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    return path


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (_missing, "no such database file"),
        (_empty, "is an empty file (0 bytes), not a story graph database: if it should hold one, it was not copied"),
        (_cut_short, "is cut short (50 bytes, less than one SQLite page), not a story graph database: a copy that"),
        (_another_applications, "holds tables but no schema version: it is not a story graph database"),
        (_not_sqlite, "is not a SQLite database"),
        (_newer, f"newer than the newest version this build supports ({SCHEMA_VERSION})"),
        (_older, f"schema version 1, older than the version {SCHEMA_VERSION} this build uses; run `story-graph-mcp db"),
        (_directory, "is a directory, not a database file"),
    ],
    ids=[
        "missing",
        "empty",
        "cut-short",
        "another-applications",
        "not-sqlite",
        "newer-schema",
        "older-schema",
        "directory",
    ],
)
def test_serve_refuses_an_unusable_database_in_one_line(
    tmp_path: Path, make: Callable[[Path], Path], expected: str
) -> None:
    path = make(tmp_path)
    result = serve_once("--db", str(path))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]


@pytest.mark.parametrize(
    ("project", "expected"),
    [
        ("atlass", "--project 'atlass' is not in"),
        ("legacy", "--project 'legacy' is inactive (not active) in"),
    ],
    ids=["missing", "inactive"],
)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_serve_checks_the_project_at_start_in_one_line(
    tmp_path: Path, project: str, expected: str, transport: str
) -> None:
    from support import demo_db

    db = demo_db(tmp_path)
    port = ["--port", "1"] if transport == "http" else []
    result = serve_once("--db", str(db), "--project", project, "--transport", transport, *port)
    assert result.returncode == 2
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert expected in line and "active projects: atlas, beacon" in line
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--port", "8080"], "--port only applies to --transport http; add --transport http, or leave it out"),
        (["--host", "0.0.0.0", "--allowed-host", "mcp.example.com"], "--host, --allowed-host only apply to"),
        (["--transport", "http", "--port", "70000"], "--port must be a port number (1-65535), not 70000"),
        (["--transport", "http", "--public-url", "mcp.example.com"], "--public-url must be an http(s) URL such as"),
        (["--transport", "http", "--public-url", "ftp://mcp.example.com/mcp"], "--public-url must be an http(s) URL"),
        (["--transport", "http", "--public-url", "https://mcp.example.com:99999/mcp"], "--public-url must be an"),
        # The OAuth resource identifier: the metadata's URL drops a query, and a fragment is never allowed.
        (
            ["--transport", "http", "--public-url", "https://mcp.example.com/mcp?tenant=a"],
            "--public-url is the URL clients use for the MCP endpoint, without a query: https://mcp.example.com/mcp",
        ),
        (["--transport", "http", "--public-url", "https://mcp.example.com/mcp#x"], "without a fragment: https://"),
        (["--transport", "http", "--public-url", "https://u:p@mcp.example.com/mcp"], "without a user name or password"),
    ],
    ids=[
        "port-on-stdio",
        "host-on-stdio",
        "port-out-of-range",
        "url-without-scheme",
        "url-not-http",
        "url-bad-port",
        "url-with-query",
        "url-with-fragment",
        "url-with-credentials",
    ],
)
def test_serve_refuses_misused_http_options_in_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    """An HTTP option without --transport http would start a stdio server that silently waits on its input."""
    from support import demo_db

    result = serve_once("--db", str(demo_db(tmp_path)), *args)
    assert result.returncode == 2
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("story-graph-mcp: ") and expected in line
    assert "Traceback" not in result.stderr


def test_version() -> None:
    from server import package_version

    result = subprocess.run(
        [sys.executable, "-m", "server", "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == f"story-graph-mcp {package_version()}" and package_version()[0].isdigit()


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, (*path, name))
    return found


def test_every_command_help_shows_an_example() -> None:
    from server.cli import _parser

    commands = _commands(_parser())
    assert len(commands) == 13  # the program, serve, db (5), policy (3), demo, and the two groups
    for command in commands:
        result = subprocess.run(
            [sys.executable, "-m", "server", *command, "--help"], capture_output=True, text=True, timeout=60, check=True
        )
        examples = result.stdout.split("\nexample", 1)
        assert len(examples) == 2, command
        runnable = [line.strip() for line in examples[1].splitlines()[1:] if line.strip()]
        assert runnable and all("story-graph-mcp" in line for line in runnable if not line.startswith("--")), command
        leaf = command[-1] if command else "story-graph-mcp"
        assert any(leaf in line for line in runnable), command


def _demo_folders(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("story-graph-demo-*"))


def _demo_env(tmp: Path) -> dict[str, str]:
    from http_support import server_env

    return {**server_env(), "TMPDIR": str(tmp)}


def test_serve_demo_removes_its_temporary_folder_on_end_of_input_and_on_sigterm(tmp_path: Path) -> None:
    from http_support import REPO

    command = [sys.executable, "-m", "server", "serve", "--demo"]
    ended = subprocess.run(
        command, input="", capture_output=True, text=True, timeout=60, cwd=REPO, env=_demo_env(tmp_path), check=False
    )
    assert ended.returncode == 0, ended.stderr
    assert _demo_folders(tmp_path) == []

    pipe = subprocess.PIPE
    process = subprocess.Popen(command, stdin=pipe, stdout=pipe, stderr=pipe, cwd=REPO, env=_demo_env(tmp_path))
    try:
        deadline = time.monotonic() + 30
        while not list(tmp_path.glob("story-graph-demo-*/demo.db")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _demo_folders(tmp_path), "the demo database is made before serving"
        time.sleep(0.5)  # serving
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode is not None and "Traceback" not in stderr.decode(), stderr.decode()
    assert _demo_folders(tmp_path) == []


def test_serve_demo_over_http_removes_its_temporary_folder_on_sigterm(tmp_path: Path) -> None:
    from http_support import REPO, free_port

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "server", "serve", "--demo", "--transport", "http", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=_demo_env(tmp_path),
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                time.sleep(0.1)
        assert _demo_folders(tmp_path)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0 and "Traceback" not in stderr.decode()
    assert _demo_folders(tmp_path) == []


SCRIPT = Path(sys.executable).parent / "story-graph-mcp"


@pytest.mark.parametrize(
    ("launcher", "on_path", "shown"),
    [
        ([sys.executable, "-m", "server"], False, [sys.executable, "-m", "server"]),
        ([str(SCRIPT)], False, [str(SCRIPT)]),  # the README's `.venv/bin/story-graph-mcp serve --demo`
        (["story-graph-mcp"], True, ["story-graph-mcp"]),  # found on PATH: the bare name works as it is
    ],
    ids=["python-m-server", "script-by-path", "script-on-path"],
)
def test_serve_on_stdio_started_in_a_terminal_says_what_it_is_waiting_for(
    tmp_path: Path, launcher: list[str], on_path: bool, shown: list[str]
) -> None:
    """By hand in a terminal, a stdio server would sit silent; an agent runtime's pipe gets no such line. The
    Inspector command it shows starts this same server: it used to say `story-graph-mcp` whatever was run, which
    the Inspector cannot spawn when the virtualenv is not on PATH."""
    from http_support import REPO, server_env
    from support import demo_db

    db = demo_db(tmp_path)
    env = server_env()
    path = [part for part in env["PATH"].split(os.pathsep) if Path(part) != SCRIPT.parent]
    env["PATH"] = os.pathsep.join([str(SCRIPT.parent)] * on_path + path)
    command = [*launcher, "serve", "--db", str(db), "--project", "atlas"]
    piped = subprocess.run(command, input="", capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
    assert (piped.returncode, piped.stderr) == (0, "")

    terminal, side = pty.openpty()
    with subprocess.Popen(
        command, stdin=side, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env
    ) as server:
        os.close(side)
        assert server.stderr is not None
        hint = b""
        deadline = time.monotonic() + 30
        while b"Ctrl-C to stop." not in hint and time.monotonic() < deadline:
            if select.select([server.stderr], [], [], 0.5)[0]:
                hint += os.read(server.stderr.fileno(), 4096)
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=30)
    os.close(terminal)
    text = hint.decode()
    assert text.startswith("story-graph-mcp: serving MCP on stdio: an MCP client launches this command"), text
    expected = shlex.join([*shown, "serve", "--db", str(db), "--project", "atlas"])
    assert f"npx -y @modelcontextprotocol/inspector@2.12.0 {expected}\n" in text, text


def test_a_relative_db_that_is_not_there_names_where_it_was_looked_for(tmp_path: Path) -> None:
    """Agent runtimes launch the server in a directory of their choosing: a relative --db then points elsewhere."""
    from support import demo_db

    demo_db(tmp_path)  # the database is in tmp_path; the runtime starts the server in another directory
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "server", "serve", "--db", "demo.db"],
        cwd=elsewhere,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 2
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert f"looked for {elsewhere / 'demo.db'}" in line and "give an absolute path" in line
    assert f"story-graph-mcp db migrate --db {elsewhere / 'demo.db'}" in line


def test_a_non_loopback_bind_says_to_put_tls_in_front_and_name_the_hosts(capsys: pytest.CaptureFixture[str]) -> None:
    """Clients reach a non-loopback bind by names the Host check refuses until they are given."""
    from server.http import _warn_if_not_loopback
    from server.settings import HttpSettings

    _warn_if_not_loopback(HttpSettings(host="0.0.0.0", port=9000))
    warning = capsys.readouterr().err
    assert "listening on 0.0.0.0, not loopback; put TLS in front" in warning
    assert "pass --allowed-host (or --public-url) for the names clients use" in warning
    _warn_if_not_loopback(HttpSettings(host="127.0.0.1"))
    assert capsys.readouterr().err == ""


def printed_by(code: str) -> list[str]:
    """The words a fresh interpreter prints running `code` (from the repository's root)."""
    root = Path(__file__).resolve().parent.parent
    found = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    return found.stdout.split()


def loaded_by(imports: str, modules: tuple[str, ...]) -> list[str]:
    """Which of `modules` a fresh interpreter has loaded after `import {imports}`."""
    return printed_by(f"import sys, {imports}; print(' '.join(m for m in {modules!r} if m in sys.modules))")


def test_stdio_serving_and_http_serving_do_not_import_each_other() -> None:
    """Shared start-up settings live in server/settings.py; `serve` loads the HTTP stack only to serve HTTP."""
    for module, other in (("server.serve", "server.http"), ("server.http", "server.serve")):
        assert loaded_by(module, (other,)) == [], (module, other)


@pytest.mark.parametrize(
    ("stop", "status", "said"),
    [(signal.SIGINT, 130, "story-graph-mcp: interrupted\n"), (signal.SIGHUP, 129, "")],
    ids=["ctrl-c", "terminal-closed"],
)
def test_ctrl_c_stops_a_stdio_server_in_a_terminal_and_removes_the_demo_folder(
    tmp_path: Path, stop: signal.Signals, status: int, said: str
) -> None:
    """The hint says "Ctrl-C to stop": asyncio's own Ctrl-C handling cancelled the serving task and then waited
    for the stdin read that no signal interrupts, so the server kept running (a second Ctrl-C printed
    "interrupted" and it still waited)."""
    import orjson
    from http_support import INITIALIZE, REPO

    terminal, side = pty.openpty()
    command = [sys.executable, "-m", "server", "serve", "--demo"]
    with subprocess.Popen(
        command, stdin=side, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=_demo_env(tmp_path)
    ) as server:
        os.close(side)
        assert server.stdout is not None
        os.write(terminal, orjson.dumps(INITIALIZE) + b"\n")  # answered: serving, and reading stdin again
        assert select.select([server.stdout], [], [], 60)[0], "no answer to initialize"
        assert b'"story-graph-mcp"' in server.stdout.readline()
        assert _demo_folders(tmp_path)
        server.send_signal(stop)
        try:
            _, stderr = server.communicate(timeout=30)
        finally:
            server.kill()
    os.close(terminal)
    assert server.returncode == status, stderr.decode()
    assert stderr.decode().endswith(said) and "Traceback" not in stderr.decode()
    assert _demo_folders(tmp_path) == []


def test_serving_does_not_load_the_importers() -> None:
    """The interchange models and the importers are built only by `db` commands: serving never uses them, and
    building their pydantic models cost about a tenth of a second of every server's start-up."""
    serving = "server.cli, server.serve, server.stdio, server.app"
    assert loaded_by(serving, ("server.contracts.interchange", "server.store.jsonl", "server.store.goodbuddy")) == []


def test_serving_builds_the_contracts_without_reading_their_docstrings() -> None:
    """pydantic's `use_attribute_docstrings` read each contract's source while building its class (a stack walk with
    `inspect.getmodule` over every loaded module, a tokenizer and two parses per class): ~110 ms of every server's
    start-up. The docstrings are read when a schema is generated (`describe_fields`), and are there then."""
    check = (
        "from server.contracts.search import SearchArgs; "
        "print(SearchArgs.model_fields['query'].description, "
        "bool(SearchArgs.model_json_schema()['properties']['query'].get('description')))"
    )
    assert printed_by(f"import server.cli, server.serve; {check}") == ["None", "True"]


SCHEMAS = """
import asyncio, orjson
from pathlib import Path
from server.app import StaticAccess, build_server
from server.contracts.base import Contract
from server.contracts.common import Grant
import server.contracts.interchange, server.serve

def subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)

server = build_server(Path("unused.db"), StaticAccess(Grant(client_id="test", default_project="atlas")))
listed = [tool.model_dump(mode="json", by_alias=True) for tool in asyncio.run(server.list_tools())]
models = {
    f"{model.__module__}.{model.__qualname__}": [
        model.model_json_schema(by_alias=by_alias, mode=mode)
        for by_alias in (True, False)
        for mode in ("validation", "serialization")
    ]
    for model in subclasses(Contract)
}
print(orjson.dumps([listed, models]).decode())
"""
ATTRIBUTE_DOCSTRINGS = """
import pydantic
from server.contracts import field_docs

config_dict = pydantic.ConfigDict

def with_attribute_docstrings(**config):
    if config.get("json_schema_extra") is field_docs.describe_fields:  # the contracts' base: pydantic reads them
        config["use_attribute_docstrings"] = True
    return config_dict(**config)

pydantic.ConfigDict = with_attribute_docstrings
field_docs.field_docstrings = lambda cls: {}
"""


def test_the_schemas_describe_fields_as_pydantics_attribute_docstrings_did() -> None:
    """The tools' listed schemas, and every contract's own JSON Schema in both modes, with and without aliases, are
    the same (key order too) as when pydantic read the field docstrings itself (`use_attribute_docstrings`)."""

    import orjson

    def schemas(prelude: str) -> str:
        found = subprocess.run(
            [sys.executable, "-c", prelude + SCHEMAS],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
            check=True,
        )
        return found.stdout

    ours, pydantics = schemas(""), schemas(ATTRIBUTE_DOCSTRINGS)
    assert ours == pydantics
    listed, models = orjson.loads(ours)
    assert len(listed) == 3 and len(models) > 40
    search = next(tool for tool in listed if tool["name"] == "story_graph_search")
    assert search["inputSchema"]["properties"]["query"]["description"]


def test_a_contract_in_a_function_or_a_class_has_its_docstrings_described() -> None:
    """As pydantic's `use_attribute_docstrings` did: a class is found by its qualified name, wherever it is."""
    from server.contracts.base import Contract

    class Outer(Contract):
        kept: int = 0
        """Said of kept."""

        class Inner(Contract):
            inner: str = ""
            """Said of inner,
            on two lines."""

    assert Outer.model_json_schema()["properties"]["kept"]["description"] == "Said of kept."
    assert Outer.Inner.model_json_schema()["properties"]["inner"]["description"] == "Said of inner,\non two lines."


@pytest.mark.anyio
async def test_the_listed_schemas_are_each_models_own(tmp_path: Path) -> None:
    """The output schemas are generated together (their shared parts once) and defaults encoded without a
    serializer each (`output_schemas`, `ListedSchema`): ~35 ms less at the first tools/list. The listed tools are the
    same as each model's own schema, generated alone by pydantic: the input schema as it is, the output schema
    inlined and made lean as before (`_reshape`)."""
    from support import client_for, demo_db

    from server.contracts.json_schema import _reshape
    from server.tools import TOOLS

    async with client_for(demo_db(tmp_path)) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert sorted(listed) == sorted(spec.name for spec in TOOLS)
    for spec in TOOLS:
        output = spec.output_model.model_json_schema(by_alias=True, mode="serialization")
        defs = output.pop("$defs", {})
        assert listed[spec.name].input_schema == spec.input_model.model_json_schema(by_alias=True), spec.name
        assert listed[spec.name].output_schema == _reshape(output, defs, ()), spec.name


COLLECTIONS_HOOK = """
import atexit, gc, sys
seen = {"full_while_building": 0, "while_serving": 0}
def count(phase, info):
    if phase != "start":
        return
    if gc.get_freeze_count():  # settle_heap() froze the built objects: the server serves
        seen["while_serving"] += 1
    elif info["generation"] == 2:
        seen["full_while_building"] += 1
gc.callbacks.append(count)
atexit.register(lambda: print(f"collections {seen}", file=sys.stderr, flush=True))
"""


@pytest.mark.anyio
async def test_a_server_starts_without_collecting_and_collects_while_it_serves(tmp_path: Path) -> None:
    """Start-up makes no full collection (the garbage collector is off while the SDK and the tools are built: their
    objects live as long as the process, and collecting them cost ~0.15 s of start-up), and the collector is on
    once the server serves: calls' garbage is collected."""
    from http_support import PYTHON, REPO, server_env
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from support import demo_db, ok

    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(COLLECTIONS_HOOK)
    env = server_env()
    env["PYTHONPATH"] = f"{hook}{os.pathsep}{env['PYTHONPATH']}"
    db = demo_db(tmp_path)
    params = StdioServerParameters(
        command=PYTHON, args=["-m", "server", "serve", "--db", str(db), "--project", "atlas"], cwd=str(REPO), env=env
    )
    log = tmp_path / "server.log"
    with log.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            for _ in range(20):
                await ok(client, "story_graph_search", {"query": "session cache decision"})
    said = log.read_text()
    assert "collections {'full_while_building': 0, 'while_serving': " in said, said
    assert int(said.split("'while_serving': ")[1].split("}")[0]) > 0, said


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.mark.parametrize(
    "case", ["port-in-use", "bad-policy", "unknown-project", "older-schema", "newer-schema", "policy-read-then-port"]
)
def test_a_start_that_fails_leaves_the_database_directory_as_it_found_it(tmp_path: Path, case: str) -> None:
    """A failed start (a port in use, a policy or project error, a database needing migration) left empty
    `graph.db-wal` and `graph.db-shm` files beside a WAL database: its checks read it with `mode=ro` connections,
    which SQLite never lets remove them."""
    from support import demo_db

    folder = tmp_path / "data"
    folder.mkdir()
    db = demo_db(folder)
    args = ["--db", str(db)]
    if case in ("older-schema", "newer-schema"):
        with closing(sqlite3.connect(db)) as conn:
            version = SCHEMA_VERSION - 1 if case == "older-schema" else SCHEMA_VERSION + 1
            conn.execute(f"PRAGMA user_version = {version}")
    elif case == "bad-policy":
        policy = tmp_path / "policy.toml"
        policy.write_text('version = 1\n[stdio]\nprojects = ["atlas"\n')
        args += ["--policy", str(policy)]
    elif case == "policy-read-then-port":  # the policy's grants are checked against the database first
        policy = tmp_path / "policy.toml"
        policy.write_text(f'version = 1\n[clients.a]\ntoken_sha256 = ["{"0" * 64}"]\nprojects = ["gone"]\n')
        args += ["--policy", str(policy)]
    elif case == "unknown-project":
        args += ["--project", "atlass"]
    with closing(sqlite3.connect(db)) as conn:  # closed, the last connection: SQLite removes its -wal and -shm
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    before = _files(folder)
    assert sorted(before) == ["demo.db"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        if case in ("port-in-use", "policy-read-then-port"):
            args += ["--transport", "http", "--port", str(taken.getsockname()[1])]
        result = serve_once(*args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert _files(folder) == before


def test_a_failed_start_and_the_read_commands_leave_wal_files_that_were_there_before(tmp_path: Path) -> None:
    """Files another process made are not a reader's to remove: a writer that stopped without a checkpoint (killed,
    a power cut) left its WAL with committed frames, and its index. A failed start and the commands that only read
    leave both byte for byte, and checkpoint nothing into the database (`db stats` used to do both)."""
    from support import demo_db

    db = demo_db(tmp_path)
    crash = (
        "import os, sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "conn.execute(\"UPDATE projects SET name = name || '!' WHERE id = 'atlas'\")\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", crash, str(db)], check=True)
    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n[stdio]\nprojects = ["atlas"]\n')
    before = _files(tmp_path)
    assert before["demo.db-wal"]  # committed frames, not yet in the database file
    for command in (
        ["serve", "--db", str(db), "--project", "atlass"],
        ["db", "stats", "--db", str(db)],
        ["db", "export", "--db", str(db)],
        ["policy", "check", str(policy), "--db", str(db)],
    ):
        run = subprocess.run(
            [sys.executable, "-m", "server", *command], capture_output=True, text=True, timeout=60, check=False
        )
        assert run.returncode == (2 if command[0] == "serve" else 0), run.stderr
        assert "Traceback" not in run.stderr
        if command[1] == "export":
            assert '"name":"Atlas sync service!"' in run.stdout  # the committed frames were read
        after = _files(tmp_path)
        # The index is shared memory that every reader may update; its file stays, and the log is untouched.
        assert sorted(after) == sorted(before), command
        assert after["demo.db-wal"] == before["demo.db-wal"] and after["demo.db"] == before["demo.db"], command


@pytest.mark.parametrize("closed", [0, 1], ids=["stdin", "stdout"])
def test_serve_on_stdio_with_its_input_or_output_closed_says_so_in_one_line(tmp_path: Path, closed: int) -> None:
    """Started with standard input or output closed (`<&-`, `>&-`), a stdio server ended in a traceback."""
    from support import demo_db

    db = demo_db(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "server", "serve", "--db", str(db)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if closed == 0 else None,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: os.close(closed),
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    name = "input" if closed == 0 else "output"
    assert result.stderr == (
        f"story-graph-mcp: serving on stdio needs standard input and output, and standard {name} is closed: an MCP"
        " client starts this command with pipes for both; to serve without them, use --transport http\n"
    )
