"""`python -m server db ...` end to end in a subprocess: output, exit codes and one-line errors."""

from __future__ import annotations

import ctypes
import os
import pty
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from jsonl_graph import chain_graph, dump, file_hash, small_graph, write_jsonl

from server.store.migrate import SCHEMA_VERSION

REPO = Path(__file__).resolve().parent.parent


def _cli(*args: str | Path, as_a_user: bool = False) -> subprocess.CompletedProcess[str]:
    """The command in a subprocess; `as_a_user`: file permissions apply to it even when the tests run as root."""
    return subprocess.run(
        [sys.executable, "-m", "server", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
        preexec_fn=_drop_file_permission_override if as_a_user and os.geteuid() == 0 else None,
    )


def _drop_file_permission_override() -> None:
    """In the child, before exec: as root, give up CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (from the bounding
    set, so they stay dropped across exec) so that file and directory permissions apply as they do to any user."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _run(command: list[str], **streams: Any) -> subprocess.CompletedProcess[str]:
    """`python -m server COMMAND` with its standard streams arranged by the caller (a full disk, a closed stream)."""
    return subprocess.run(
        [sys.executable, "-m", "server", *command], cwd=REPO, text=True, timeout=60, check=False, **streams
    )


def _to_a_full_disk(command: list[str]) -> subprocess.CompletedProcess[str]:
    """The command with its standard output on /dev/full (every write fails: no space left on device)."""
    with open("/dev/full", "w") as full:
        return _run(command, stdout=full, stderr=subprocess.PIPE)


def _one_line_error(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1
    assert run.stderr.startswith("story-graph-mcp: ")
    return run.stderr


def test_migrate_import_export_and_stats_work_end_to_end(tmp_path: Path) -> None:
    db = tmp_path / "graph.db"
    graph = write_jsonl(tmp_path / "graph.jsonl", small_graph())

    migrated = _cli("db", "migrate", "--db", db)
    assert (migrated.returncode, migrated.stdout) == (0, f"{db}: schema version 0 -> {SCHEMA_VERSION}\n")
    assert _cli("db", "migrate", "--db", db).stdout == f"{db}: up to date ({SCHEMA_VERSION})\n"

    imported = _cli("db", "import", "--db", db, graph)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith(f"imported {len(small_graph())} lines (2 project, ")

    to_stdout = _cli("db", "export", "--db", db)
    to_file = _cli("db", "export", "--db", db, tmp_path / "out.jsonl")
    assert to_stdout.returncode == to_file.returncode == 0
    assert to_stdout.stdout.encode() == (tmp_path / "out.jsonl").read_bytes()
    assert len(to_stdout.stdout.splitlines()) == len(small_graph())

    stats = _cli("db", "stats", "--db", db)
    assert stats.returncode == 0
    assert f"schema version: {SCHEMA_VERSION}" in stats.stdout
    assert 'projects:["alpha"]' in stats.stdout
    assert "relations" in stats.stdout
    # The ids `serve --project` and a policy's grants name, with what makes them readable.
    assert '\nprojects: alpha "Alpha" (active), beta "Beta" (active)\n' in stats.stdout


def test_commands_that_only_read_leave_no_wal_or_shm_files_beside_the_database(tmp_path: Path) -> None:
    """`demo` then `db export` (README, docs/demo.md) used to leave empty `demo.db-wal` and `demo.db-shm` files: a
    read-only connection to a WAL database creates them and cannot remove them when it closes."""
    db = tmp_path / "demo.db"
    assert _cli("demo", db).returncode == 0
    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n[stdio]\nprojects = ["atlas"]\n')
    for command in (
        ("db", "export", "--db", db, tmp_path / "graph.jsonl"),
        ("db", "export", "--db", db),
        ("db", "stats", "--db", db),
        ("policy", "check", policy, "--db", db),
    ):
        run = _cli(*command)
        assert run.returncode == 0, run.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.db", "graph.jsonl", "policy.toml"], command
    with sqlite3.connect(db) as conn:  # still in WAL mode: nothing was changed to get there
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_import_and_stats_on_a_missing_database_fail_with_one_line(tmp_path: Path) -> None:
    graph = write_jsonl(tmp_path / "graph.jsonl", small_graph())
    missing = tmp_path / "missing.db"

    for run in (_cli("db", "import", "--db", missing, graph), _cli("db", "stats", "--db", missing)):
        assert "does not exist; create it with `story-graph-mcp db migrate --db" in _one_line_error(run)
    assert not missing.exists()


def test_a_bad_line_fails_the_import_with_one_line_naming_it(tmp_path: Path) -> None:
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    bad = write_jsonl(tmp_path / "bad.jsonl", [*small_graph(), {"kind": "project", "id": "x"}])

    error = _one_line_error(_cli("db", "import", "--db", db, bad))

    assert f"line {len(small_graph()) + 1}, field 'name': required field is missing" in error


def test_stats_on_a_file_that_is_not_sqlite_fails_with_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00not sqlite" * 100)

    assert "is not a SQLite database" in _one_line_error(_cli("db", "stats", "--db", junk))


def test_progress_goes_to_stderr_as_plain_lines_when_it_is_not_a_terminal(tmp_path: Path) -> None:
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    lines = chain_graph(500)
    graph = write_jsonl(tmp_path / "chain.jsonl", lines)

    imported = _cli("db", "import", "--db", db, graph, "--progress-every", "0")
    exported = _cli("db", "export", "--db", db, "--progress-every", "0")
    quiet = _cli("db", "export", "--db", db, "--quiet")

    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith(f"imported {len(lines)} lines (")
    assert imported.stdout.count("\n") == 1
    progress = imported.stderr.splitlines()
    counted = (
        r"import: (reading|writing|indexing): [\d,]+( of [\d,]+)? (lines|items)( \(\d+%\))? (so far|done),"
        r" [\d,]+ (lines|items)/s, [\d.]+ s elapsed"
    )
    timed = r"import: writing the index: (running|done), [\d.]+ s elapsed"
    assert all(re.fullmatch(counted, text) or re.fullmatch(timed, text) for text in progress), progress
    assert any(text.startswith(f"import: reading: {len(lines):,} lines (100%) done") for text in progress)
    assert any(
        text.startswith(f"import: writing: {len(lines):,} of {len(lines):,} lines (100%) done, ") for text in progress
    )
    # The search index is rebuilt once, last: one item per searchable object written (then written out,
    # which shows only its time, and only when it takes long enough to print a line).
    assert any(re.match(r"import: indexing: ([\d,]+) of \1 items \(100%\) done, ", text) for text in progress)
    assert progress[-1].startswith(("import: indexing: ", "import: writing the index: done, ")), progress[-1]
    # Progress never mixes into the exported data.
    assert exported.stdout == quiet.stdout
    assert len(exported.stdout.splitlines()) == len(lines)
    assert exported.stderr.splitlines()[-1].startswith(f"export: writing: {len(lines):,} of {len(lines):,} lines")
    assert quiet.stderr == ""


def test_progress_is_a_bar_on_a_terminal(tmp_path: Path) -> None:
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    graph = write_jsonl(tmp_path / "graph.jsonl", small_graph())
    controller, terminal = pty.openpty()
    try:
        run = subprocess.Popen(
            [sys.executable, "-m", "server", "db", "import", "--db", str(db), str(graph)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=terminal,
        )
        os.close(terminal)  # the child holds the terminal now; reading ends when it exits
        shown = b""
        while chunk := _read(controller):  # read while it runs, so a full terminal buffer never blocks it
            shown += chunk
        stdout, _ = run.communicate(timeout=60)
    finally:
        os.close(controller)

    assert run.returncode == 0
    assert stdout.decode().startswith("imported ")
    text = shown.decode()
    assert "\r" in text
    assert re.search(r"import: reading \[#{24}\] 100% [\d,]+ lines", text), text
    assert re.search(rf"import: writing \[#{{24}}\] 100% {len(small_graph())} lines", text), text


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # the terminal's other end is closed: everything has been read
        return b""


def test_a_dry_run_prints_what_would_be_imported_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    graph = write_jsonl(tmp_path / "graph.jsonl", small_graph())
    before = dump(db), file_hash(db)

    dry = _cli("db", "import", "--db", db, graph, "--dry-run")

    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith(f"dry run: would import {len(small_graph())} lines (2 project, ")
    assert dry.stdout.endswith("; 0 unchanged; nothing was written\n")
    assert (dump(db), file_hash(db)) == before


def test_export_writes_through_a_symlink_a_fifo_and_keeps_the_old_files_permissions(tmp_path: Path) -> None:
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    assert _cli("db", "import", "--db", db, write_jsonl(tmp_path / "graph.jsonl", small_graph())).returncode == 0
    expected = _cli("db", "export", "--db", db).stdout

    # A private backup reached through a symlink: the link stays a link, the file it names is replaced, still 0600.
    backups = tmp_path / "backups"
    backups.mkdir()
    (backups / "graph.jsonl").write_text("the old backup\n")
    (backups / "graph.jsonl").chmod(0o600)
    (tmp_path / "latest.jsonl").symlink_to(backups / "graph.jsonl")
    assert _cli("db", "export", "--db", db, tmp_path / "latest.jsonl").returncode == 0
    assert (tmp_path / "latest.jsonl").is_symlink()
    assert (backups / "graph.jsonl").read_text() == expected
    assert (backups / "graph.jsonl").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in backups.iterdir()) == ["graph.jsonl"]

    # A named pipe (or a device such as /dev/stdout) is written into, not replaced by a regular file.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    assert _cli("db", "export", "--db", db, fifo).returncode == 0
    assert reader.communicate(timeout=30)[0] == expected
    assert fifo.is_fifo()


def test_an_export_or_report_to_a_full_disk_fails_with_one_line(tmp_path: Path) -> None:
    if not Path("/dev/full").is_char_device():
        pytest.skip("no /dev/full here")
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    assert _cli("db", "import", "--db", db, write_jsonl(tmp_path / "graph.jsonl", small_graph())).returncode == 0

    # `db export --db graph.db > /dev/full`, and the commands that print a short report
    for command in (["db", "export", "--db", str(db)], ["db", "stats", "--db", str(db)], ["policy", "new-token"]):
        to_stdout = _to_a_full_disk(command)
        assert "standard output: No space left on device" in _one_line_error(to_stdout), command


def _close_stdout() -> None:
    os.close(1)


def test_a_command_started_with_standard_output_closed_fails_with_one_line(tmp_path: Path) -> None:
    """Started with standard output closed (`>&-`), `db stats` and `policy new-token` printed nothing and exited 0
    (Python's print drops text when there is no stdout), and `db export` ended in a traceback."""
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    for command, reason in (
        (["db", "stats", "--db", str(db)], "it is closed"),
        (["policy", "new-token"], "it is closed"),
        (["db", "export", "--db", str(db)], "it is closed; name a FILE to export to"),
    ):
        run = _run(command, stderr=subprocess.PIPE, preexec_fn=_close_stdout)
        assert _one_line_error(run) == f"story-graph-mcp: cannot write to standard output: {reason}\n", command


def _close_stderr() -> None:
    os.close(2)


def test_a_command_started_with_standard_error_closed_keeps_its_exit_status_and_its_data_clean(tmp_path: Path) -> None:
    """Started with stderr closed (`2>&-`, a daemon's job), an import ended in a traceback nobody saw (exit status
    1: its progress needs stderr), and an error line went to stdout, into an export's data (print's fallback)."""
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    graph = write_jsonl(tmp_path / "graph.jsonl", small_graph())
    runs = {
        name: _run(command, stdout=subprocess.PIPE, preexec_fn=_close_stderr)
        for name, command in (
            ("import", ["db", "import", "--db", str(db), str(graph)]),
            ("export", ["db", "export", "--db", str(tmp_path / "missing.db")]),
        )
    }
    assert runs["import"].returncode == 0
    assert runs["import"].stdout.startswith(f"imported {len(small_graph())} lines")
    assert (runs["export"].returncode, runs["export"].stdout) == (2, "")


def test_a_change_is_done_and_reported_on_stderr_when_standard_output_fails(tmp_path: Path) -> None:
    """`db import ... > /dev/full` committed the import, then said `cannot write to standard output` with exit status
    2, which says nothing was changed: a script would take the import (or migration, or export) for failed."""
    if not Path("/dev/full").is_char_device():
        pytest.skip("no /dev/full here")
    db, out = tmp_path / "graph.db", tmp_path / "out.jsonl"
    graph = write_jsonl(tmp_path / "graph.jsonl", small_graph())
    for command, report in (
        (["db", "migrate", "--db", str(db)], f"{db}: schema version 0 -> {SCHEMA_VERSION}"),
        (["db", "import", "--db", str(db), str(graph)], f"imported {len(small_graph())} lines"),
        (["db", "export", "--db", str(db), str(out)], f"exported {len(small_graph())} lines from {db} to {out}"),
        (["demo", str(tmp_path / "demo.db")], f"wrote the demo graph to {tmp_path / 'demo.db'}"),
    ):
        run = _to_a_full_disk(command)
        assert run.returncode == 0, run.stderr
        first, said = run.stderr.splitlines()
        assert first == "story-graph-mcp: cannot write to standard output: No space left on device; the report instead:"
        assert said.startswith(report), command
    assert len(out.read_text().splitlines()) == len(small_graph())
    assert (tmp_path / "demo.db").exists()


@pytest.mark.parametrize("phase", ["reading", "writing", "indexing", "writing the index"])
def test_ctrl_c_during_an_import_says_so_and_writes_nothing(tmp_path: Path, phase: str) -> None:
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    graph = write_jsonl(tmp_path / "chain.jsonl", chain_graph(20_000))
    before = dump(db)
    command = [sys.executable, "-m", "server", "db", "import", "--db", str(db), str(graph), "--progress-every", "0.05"]
    with subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True) as importer:
        assert importer.stderr is not None
        for line in importer.stderr:  # progress lines, every 0.05 s: interrupt once the phase has begun
            if line.startswith(f"import: {phase}: "):
                importer.send_signal(signal.SIGINT)
                break
        rest = importer.stderr.read()
        importer.wait(timeout=60)
    assert importer.returncode == 130, rest
    assert rest.splitlines()[-1] == "story-graph-mcp: interrupted; the import wrote nothing"
    assert "Traceback" not in rest and "user-defined function" not in rest
    assert dump(db) == before


@pytest.fixture(scope="module")
def chain_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database of 50,008 objects: an export of it takes long enough to be interrupted half way."""
    folder = tmp_path_factory.mktemp("chain")
    db = folder / "graph.db"
    _cli("db", "migrate", "--db", db)
    assert _cli("db", "import", "--db", db, write_jsonl(folder / "chain.jsonl", chain_graph(20_000))).returncode == 0
    return db


@pytest.mark.parametrize("to", ["new-file", "existing-file", "stdout", "fifo"])
def test_ctrl_c_during_an_export_says_what_became_of_the_output(tmp_path: Path, chain_db: Path, to: str) -> None:
    """An interrupted export said `FILE was left as it was` also of a file it never wrote, and of a FIFO it had
    written half an export into; on standard output (`db export > backup.jsonl`) it said only `interrupted`, and
    the output ended with a whole line, so it looked complete: `db import` of it loaded part of the graph."""
    out = tmp_path / "backup.jsonl"
    received = tmp_path / "received.jsonl"
    target: list[str] = [] if to == "stdout" else [str(out)]
    if to == "existing-file":
        out.write_bytes(b"the previous backup\n")
    command = [sys.executable, "-m", "server", "db", "export", "--db", str(chain_db), *target]
    with received.open("wb") as sink:
        if to == "fifo":
            os.mkfifo(out)
            reader = subprocess.Popen(["cat", str(out)], stdout=sink)
        with subprocess.Popen(
            [*command, "--progress-every", "0.05"], cwd=REPO, stderr=subprocess.PIPE, stdout=sink, text=True
        ) as exporter:
            assert exporter.stderr is not None
            for line in exporter.stderr:  # progress lines, every 0.05 s: interrupt once lines are being written
                if line.startswith("export: writing: ") and not line.startswith("export: writing: 0 "):
                    exporter.send_signal(signal.SIGINT)
                    break
            rest = exporter.stderr.read()
            exporter.wait(timeout=60)
        if to == "fifo":
            reader.wait(timeout=60)
    assert exporter.returncode == 130, rest
    assert "Traceback" not in rest
    said = rest.splitlines()[-1]
    if to == "new-file":
        assert said == f"story-graph-mcp: interrupted; {out} was not written"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["received.jsonl"]  # no backup.jsonl.partial either
        return
    if to == "existing-file":
        assert said == f"story-graph-mcp: interrupted; {out} was left as it was"
        assert out.read_bytes() == b"the previous backup\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.jsonl", "received.jsonl"]
        return
    where = "standard output" if to == "stdout" else str(out)
    match = re.fullmatch(
        f"story-graph-mcp: interrupted; {re.escape(where)} received only about the first ([0-9,]+) of 50,008 lines:"
        r" it is not a complete export \(its last line says so, and an import of it fails\)",
        said,
    )
    assert match is not None, said
    written = int(match.group(1).replace(",", ""))
    lines = received.read_bytes().splitlines()
    assert 0 < written < 50_008
    assert lines[-1] == b"story-graph-mcp: export interrupted; this output is incomplete"
    # About: Ctrl-C may come between a line's write and its count. An empty line when it came between two lines.
    assert written <= len(lines) - 2 <= written + 1
    copy = tmp_path / "copy.db"
    _cli("db", "migrate", "--db", copy)
    before = dump(copy)
    error = _one_line_error(_cli("db", "import", "--db", copy, received))
    assert error == (
        f"story-graph-mcp: import aborted, nothing was written: line {len(lines)}: the export that wrote this file was"
        " interrupted, so it holds only part of a graph: export again\n"
    )
    assert dump(copy) == before


def test_an_import_while_another_writer_holds_the_database_says_so_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    graph = write_jsonl(tmp_path / "graph.jsonl", small_graph())
    before = dump(db)
    writer = sqlite3.connect(db, isolation_level=None)  # another import, or the application that owns the data
    try:
        writer.execute("BEGIN IMMEDIATE")
        error = _one_line_error(_cli("db", "import", "--db", db, graph))
    finally:
        writer.close()
    assert "nothing was written" in error and "is locked by another writer" in error
    assert "run the import again when it has finished" in error
    assert dump(db) == before


def test_an_export_over_the_database_or_its_journal_files_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """`db export --db graph.db graph.db` (FILE and --db mixed up) used to replace the database with its own export,
    and `graph.db-wal` the live write-ahead log, exit status 0."""
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    assert _cli("db", "import", "--db", db, write_jsonl(tmp_path / "graph.jsonl", small_graph())).returncode == 0
    before = dump(db)
    (tmp_path / "link.db").symlink_to(db)
    for target in (db, tmp_path / "link.db", tmp_path / "graph.db-wal", tmp_path / "graph.db-journal"):
        error = _one_line_error(_cli("db", "export", "--db", db, target))
        assert f"will not export to {target}: it is the database" in error
        assert "name a new file for the export, such as graph.jsonl" in error
    assert dump(db) == before
    assert not (tmp_path / "graph.db-journal").exists()


def test_an_export_to_a_file_says_what_it_wrote_and_dash_is_standard_output(tmp_path: Path) -> None:
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    assert _cli("db", "import", "--db", db, write_jsonl(tmp_path / "graph.jsonl", small_graph())).returncode == 0
    out = tmp_path / "out.jsonl"

    to_file = _cli("db", "export", "--db", db, out, "--quiet")
    assert (to_file.returncode, to_file.stdout) == (0, f"exported {len(small_graph())} lines from {db} to {out}\n")

    # `-` was a file named `-` in the working directory, written without a word.
    dash = _cli("db", "export", "--db", db, "-", "--quiet")
    assert dash.returncode == 0
    assert dash.stdout.encode() == out.read_bytes()
    assert not (REPO / "-").exists()


@contextmanager
def _read_only(directory: Path) -> Iterator[None]:
    directory.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    try:
        yield
    finally:
        directory.chmod(stat.S_IRWXU)


def test_a_read_only_database_or_directory_is_named_with_the_fix(tmp_path: Path) -> None:
    """An import into a database the user cannot write said `graph.db: attempt to write a readonly database`, and
    every command on a WAL database in a read-only directory `graph.db is not a SQLite database (attempt to write a
    readonly database)`: the fix (the file's or the directory's permissions) was left to guess."""
    graph = write_jsonl(tmp_path / "graph.jsonl", small_graph())
    directory = Path(tempfile.mkdtemp(prefix="sg-cli-readonly-"))
    try:
        db = directory / "graph.db"
        _cli("db", "migrate", "--db", db)
        before = dump(db)
        db.chmod(0o444)
        file_read_only = _one_line_error(_cli("db", "import", "--db", db, graph, as_a_user=True))
        db.chmod(0o644)
        for leftover in directory.glob("graph.db-*"):  # a reader that finds them needs nothing more of the directory
            leftover.unlink()
        with _read_only(directory):
            in_directory = {
                command[1]: _cli(*command, as_a_user=True)
                for command in (
                    ("db", "import", "--db", db, graph),
                    ("db", "stats", "--db", db),
                    ("db", "migrate", "--db", directory / "new.db"),
                )
            }
        after = dump(db)
    finally:
        shutil.rmtree(directory)
    if "read-only for this user" not in file_read_only and "attempt to write" not in file_read_only:
        pytest.skip(f"cannot make a file read-only for a child process here: {file_read_only}")
    assert file_read_only == (
        f"story-graph-mcp: import aborted, nothing was written: {db} is read-only for this user: run the command as"
        f" the user that owns it, or make it writable (chmod u+w {db})\n"
    )
    for command, run in in_directory.items():
        error = _one_line_error(run)
        named = directory / ("new.db" if command == "migrate" else "graph.db")
        assert f"the directory of {named}, {directory}," in error
        assert "is read-only for this user" in error and "make the directory writable for this user" in error
        assert "not a SQLite database" not in error, command
    assert after == before


def test_a_database_this_user_cannot_read_is_named_with_the_fix(tmp_path: Path) -> None:
    """Every command said `cannot open graph.db: unable to open database file` of a database its user may not read
    (and `db migrate` that it was read-only), leaving the operator to guess at the cause."""
    graph = write_jsonl(tmp_path / "graph.jsonl", small_graph())
    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n[stdio]\nprojects = ["alpha"]\n')
    other = tmp_path / "other.db"
    _cli("db", "migrate", "--db", other)
    directory = Path(tempfile.mkdtemp(prefix="sg-cli-unreadable-"))
    try:
        db = directory / "graph.db"
        _cli("db", "migrate", "--db", db)
        db.chmod(0)
        runs = [
            _cli(*command, as_a_user=True)
            for command in (
                ("db", "migrate", "--db", db),
                ("db", "import", "--db", db, graph),
                ("db", "export", "--db", db),
                ("db", "stats", "--db", db),
                ("policy", "check", policy, "--db", db),
                ("db", "import", "--db", other, "--from", "goodbuddy", db),
                ("serve", "--db", db),
            )
        ]
    finally:
        shutil.rmtree(directory)
    expected = (
        f"{db} is not readable for this user: run the command as the user that owns it, or make it readable"
        f" (chmod u+r {db})\n"
    )
    for run in runs:
        assert _one_line_error(run).endswith(expected), run.args


def test_a_damaged_or_locked_database_is_not_called_not_a_sqlite_database(tmp_path: Path) -> None:
    """Every failure of the first read was reported as `X is not a SQLite database (...)`: a database a writer
    holds locked (an import into a DELETE-mode snapshot), or a damaged one, sent the operator after the wrong
    problem."""
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    assert _cli("db", "import", "--db", db, write_jsonl(tmp_path / "graph.jsonl", small_graph())).returncode == 0
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(db.read_bytes()[:8192])
    assert "damaged.db is damaged (database disk image is malformed); restore it from a backup" in _one_line_error(
        _cli("db", "stats", "--db", damaged)
    )

    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    writer = sqlite3.connect(db, isolation_level=None)
    try:
        writer.execute("BEGIN EXCLUSIVE")
        writer.execute("DELETE FROM memory_items")
        commands = [
            ("db", "stats", "--db", db),
            ("db", "export", "--db", db),
            ("db", "migrate", "--db", db),
            ("serve", "--db", db),
        ]
        started = [
            subprocess.Popen(
                [sys.executable, "-m", "server", *map(str, command)],
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for command in commands
        ]
        errors = [(run.communicate(timeout=60)[1], run.returncode) for run in started]
    finally:
        writer.close()
    for (error, status), command in zip(errors, commands, strict=True):
        assert status == 2, command
        assert error == (
            f"story-graph-mcp: {db} is locked by another process (an import, or the application that writes it) for"
            " longer than 5 seconds; try again when it has finished\n"
        ), command


def test_migrate_names_a_missing_directory_and_keeps_an_existing_databases_journal_mode(tmp_path: Path) -> None:
    """`db migrate --db nodir/graph.db` (and `demo nodir/demo.db`) said `unable to open database file`; and `db migrate`
    on an up-to-date snapshot published in DELETE journal mode (docs/deployment.md) turned it back to WAL unasked."""
    missing = tmp_path / "nodir"
    for command in (("db", "migrate", "--db", missing / "graph.db"), ("demo", missing / "demo.db")):
        error = _one_line_error(_cli(*command))
        assert f"the directory {tmp_path / 'nodir'} does not exist; create it first (mkdir -p" in error, command
    assert not (tmp_path / "nodir").exists()

    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    assert _cli("db", "migrate", "--db", db).stdout == f"{db}: up to date ({SCHEMA_VERSION})\n"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_import_reads_standard_input_for_dash_and_says_when_a_file_holds_nothing(tmp_path: Path) -> None:
    """`db export ... | db import --db copy.db -` failed (`cannot read -`), or read a file named `-`; and an empty
    file (a failed export, a wrong path) imported as `imported 0 lines (nothing new)` without a word."""
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    graph = write_jsonl(tmp_path / "graph.jsonl", small_graph())
    with graph.open("rb") as lines:
        piped = subprocess.run(
            [sys.executable, "-m", "server", "db", "import", "--db", str(db), "-"],
            cwd=REPO,
            stdin=lines,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith(f"imported {len(small_graph())} lines (2 project, ")

    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n \n")
    run = _cli("db", "import", "--db", db, empty)
    assert run.returncode == 0
    assert run.stdout.splitlines() == [
        f"imported 0 lines (nothing new) into {db}; 0 unchanged",
        f"note: {empty} holds no objects (it is empty, or only blank lines): nothing to import",
    ]


def test_an_empty_db_option_is_a_usage_error_not_the_working_directory() -> None:
    """`--db "$DB"` with DB unset gave `--db ''`, which pathlib reads as `.`: `. is a directory, not a database`."""
    for command in (("db", "stats", "--db", ""), ("serve", "--db", ""), ("policy", "check", "x.toml", "--db", "")):
        run = _cli(*command)
        assert run.returncode == 2
        assert run.stderr.splitlines()[-1].endswith("error: argument --db: empty: give the database file's path")


@pytest.mark.parametrize(
    ("command", "usage", "error"),
    [
        ((), "story-graph-mcp [-h]", "story-graph-mcp: error: the following arguments are required: {serve,db,"),
        (("db",), "story-graph-mcp db [-h]", "required: {migrate,import,export,stats,optimize}"),
        (("policy",), "story-graph-mcp policy [-h]", "required: {new-token,hash-token,check}"),
        (("db", "stats", "--db", "x.db", "extra"), "story-graph-mcp db stats [-h]", "db stats: error: unrecognized"),
        (("db", "export", "--db", "x.db", "--quite"), "story-graph-mcp db export [-h]", "arguments: --quite"),
        (("policy", "new-token", "x"), "story-graph-mcp policy new-token [-h]", "unrecognized arguments: x"),
    ],
    ids=["no-command", "no-db-command", "no-policy-command", "stray-argument", "misspelt-option", "stray-to-policy"],
)
def test_a_missing_command_or_a_stray_argument_is_named_with_the_commands_usage(
    command: tuple[str, ...], usage: str, error: str
) -> None:
    """A missing command was named by argparse's internal name (`required: db_command`), and a stray argument or a
    misspelt option of `db stats` got the usage of the whole program, not of `db stats`."""
    run = _cli(*command)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert run.stderr.startswith(f"usage: {usage}")
    assert error in run.stderr.splitlines()[-1]


def test_a_loop_of_symbolic_links_is_a_usage_error_not_a_traceback(tmp_path: Path) -> None:
    """`a.db -> b.db -> a.db`: `db migrate`, `db export FILE` and `demo` ended in a traceback (`RuntimeError:
    Symlink loop`), and the other commands said it does not exist or is not a database."""
    loop, other = tmp_path / "a.db", tmp_path / "b.db"
    loop.symlink_to(other)
    other.symlink_to(loop)
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    for command in (
        ("db", "migrate", "--db", loop),
        ("db", "export", "--db", db, loop),
        ("db", "import", "--db", db, loop),
        ("db", "stats", "--db", loop),
        ("serve", "--db", loop),
        ("demo", loop),
    ):
        run = _cli(*command)
        assert run.returncode == 2 and "Traceback" not in run.stderr, command
        assert run.stderr.splitlines()[-1].endswith(f": {loop} is a loop of symbolic links; point it at a file")
    assert loop.is_symlink() and other.is_symlink()


def test_a_goodbuddy_import_from_standard_input_says_it_needs_the_file(tmp_path: Path) -> None:
    """`--from goodbuddy -` said `/dev/stdin is not a GoodBuddy assistant database`: SQLite opens files only."""
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    assert _one_line_error(_cli("db", "import", "--db", db, "--from", "goodbuddy", "-")) == (
        "story-graph-mcp: --from goodbuddy reads the app's database file: name it (- is for JSON Lines only)\n"
    )


def test_an_export_into_a_missing_or_read_only_directory_names_the_directory(tmp_path: Path) -> None:
    """`cannot write backups/graph.jsonl: Permission denied` for a file the user may write (the export goes to
    `graph.jsonl.partial` beside it, which the read-only directory refuses), and `No such file or directory` for a
    missing folder, sent the operator after the file."""
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    missing = _one_line_error(_cli("db", "export", "--db", db, tmp_path / "nodir" / "graph.jsonl"))
    assert f"the directory {tmp_path / 'nodir'} does not exist; create it first (mkdir -p" in missing

    directory = Path(tempfile.mkdtemp(prefix="sg-cli-readonly-"))
    try:
        out = directory / "graph.jsonl"
        out.write_text("the old backup\n")
        out.chmod(0o666)
        with _read_only(directory):
            run = _cli("db", "export", "--db", db, out, as_a_user=True)
        kept = out.read_text()
    finally:
        shutil.rmtree(directory)
    if run.returncode == 0:
        pytest.skip("cannot make a directory read-only for a child process here")
    assert _one_line_error(run) == (
        f"story-graph-mcp: cannot write {out}: the directory {directory} is read-only for this user, and an export"
        " is written to graph.jsonl.partial next to graph.jsonl, then renamed over it: make the directory writable,"
        " or export to another directory\n"
    )
    assert kept == "the old backup\n"


def test_progress_every_takes_a_number_of_seconds(tmp_path: Path) -> None:
    # `nan` printed no progress at all, `inf` none either, and a negative interval was taken as 0.
    db = tmp_path / "graph.db"
    graph = write_jsonl(tmp_path / "graph.jsonl", small_graph())
    for value in ("nan", "-1", "inf", "soon"):
        run = _cli("db", "import", "--db", db, graph, "--progress-every", value)
        assert run.returncode == 2 and "Traceback" not in run.stderr
        assert "argument --progress-every: expected a number of seconds" in run.stderr and repr(value) in run.stderr
    assert not db.exists()
    assert _cli("db", "export", "--db", db, "--progress-every", "-5").returncode == 2


def test_a_version_a_reference_imported_earlier_contradicts_is_refused_on_the_command_line(tmp_path: Path) -> None:
    """ref-1 names version v3 of src-1, not in its file; a later file stores v3 without the text ref-1 saved from it:
    the import used to take it (status 0) and the tools then showed ref-1's range unknown, unexplained."""
    db = tmp_path / "graph.db"
    _cli("db", "migrate", "--db", db)
    lines = small_graph()
    for line in lines:
        if line.get("id") == "ref-1":
            line["source_version"] = "v3"
    assert _cli("db", "import", "--db", db, write_jsonl(tmp_path / "graph.jsonl", lines)).returncode == 0
    before = dump(db)
    v3 = {"kind": "source_version", "source_id": "src-1", "version": "v3", "text": "short other text"}
    later = write_jsonl(tmp_path / "later.jsonl", [v3 | {"recorded_at": "2026-03-03T00:00:00Z"}])

    for dry_run in ((), ("--dry-run",)):
        error = _one_line_error(_cli("db", "import", "--db", db, later, *dry_run))
        assert error == (
            "story-graph-mcp: import aborted, nothing was written: line 1, field 'text': source_reference 'ref-1',"
            " stored before this import, saved 'first text' at [6, 16) of source 'src-1' version 'v3', but this text"
            " reads 'other text' there: correct this text, or add a source_reference line for 'ref-1' with null start"
            " and end to this file (an import does not change a stored reference: it keeps what it saved, read as"
            " unknown)\n"
        )
    assert dump(db) == before
