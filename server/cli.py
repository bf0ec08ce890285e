"""The `story-graph-mcp` command: serve the graph, and create, fill, export and inspect databases."""

from __future__ import annotations

import argparse
import errno
import gc
import math
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Final

from server import package_version
from server.store.errors import Interrupted, StoreError
from server.store.progress import DEFAULT_EVERY_SECONDS, Progress
from server.store.stdout import print_out, print_report

EXAMPLES: dict[str, str] = {
    "story-graph-mcp": """examples:
  story-graph-mcp serve --demo                     # try it: stdio server on the bundled demo graph
  story-graph-mcp serve --db graph.db --project atlas
  story-graph-mcp serve --transport http --db graph.db --policy policy.toml
  story-graph-mcp db migrate --db graph.db && story-graph-mcp db import --db graph.db graph.jsonl
  story-graph-mcp COMMAND --help                   # every command has examples""",
    "serve": """examples:
  story-graph-mcp serve --demo                                   # stdio, demo graph, current project atlas
  story-graph-mcp serve --db graph.db --project atlas            # stdio, as an agent runtime launches it
  story-graph-mcp serve --transport http --demo                  # HTTP on 127.0.0.1:8765 with a one-run token
  story-graph-mcp serve --transport http --db graph.db --policy policy.toml \\
      --cursor-secret-file secret --port 8765 --busy-timeout 2   # HTTP for several clients (docs/deployment.md)
  story-graph-mcp serve --transport http --workers 4 --db graph.db --policy policy.toml \\
      --cursor-secret-file secret                                # one worker process per CPU core""",
    "db": """examples:
  story-graph-mcp db migrate --db graph.db
  story-graph-mcp db import --db graph.db graph.jsonl
  story-graph-mcp db export --db graph.db backup.jsonl
  story-graph-mcp db stats --db graph.db
  story-graph-mcp db optimize --db graph.db""",
    "migrate": """example:
  story-graph-mcp db migrate --db graph.db      # creates graph.db, or upgrades it to the current schema""",
    "import": """examples:
  story-graph-mcp db import --db graph.db graph.jsonl   # all lines or nothing (docs/interchange.md)
  story-graph-mcp db import --db graph.db --from goodbuddy assistant.db        # re-run to sync; never writes it
  story-graph-mcp db import --db graph.db --from memory-jsonl memory.jsonl --project notes""",
    "export": """examples:
  story-graph-mcp db export --db graph.db backup.jsonl
  story-graph-mcp db export --db graph.db | head -3    # to standard output (also: FILE -)""",
    "stats": """example:
  story-graph-mcp db stats --db graph.db""",
    "optimize": """example:
  story-graph-mcp db optimize --db graph.db     # after upgrading: `db stats` says when it helps""",
    "policy": """examples:
  story-graph-mcp policy new-token
  printf '%s\\n' "$TOKEN" | story-graph-mcp policy hash-token
  story-graph-mcp policy check policy.toml
  story-graph-mcp policy check policy.toml --db graph.db   # also: every granted project is in the database""",
    "new-token": """example:
  story-graph-mcp policy new-token     # prints a token and the token_sha256 line for the policy file""",
    "hash-token": """example:
  printf '%s\\n' "$TOKEN" | story-graph-mcp policy hash-token   # stdin keeps it out of shell history""",
    "check": """examples:
  story-graph-mcp policy check policy.toml
  story-graph-mcp policy check policy.toml --db graph.db   # also: every granted project is in the database""",
    "demo": """example:
  story-graph-mcp demo /tmp/demo.db && story-graph-mcp db stats --db /tmp/demo.db""",
}


def _command(commands: Any, name: str, help: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name, help=help, description=help[0].upper() + help[1:] + ".", epilog=EXAMPLES[name], formatter_class=_FORMAT
    )
    # The innermost command's parser wins (a subcommand's defaults override its parent's): see `main`.
    parser.set_defaults(parser_of_command=parser)
    return parser


def _named_choices(commands: Any) -> None:
    """A missing command is named by its choices, as the usage line shows them: argparse names it by its `dest`,
    and `the following arguments are required: db_command` names nothing the user can type."""
    commands.metavar = "{" + ",".join(commands.choices) + "}"


_FORMAT = argparse.RawDescriptionHelpFormatter


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="story-graph-mcp",
        description="A read-only MCP server over a temporal story graph in SQLite.",
        epilog=EXAMPLES["story-graph-mcp"],
        formatter_class=_FORMAT,
    )
    parser.add_argument("--version", action="version", version=f"story-graph-mcp {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = _command(commands, "serve", "serve the three read-only tools over stdio or Streamable HTTP")
    source = serve.add_mutually_exclusive_group(required=True)
    source.add_argument("--db", type=_database, help="the story graph database (opened read-only)")
    source.add_argument("--demo", action="store_true", help="serve the bundled demo graph")
    serve.add_argument("--project", help="the caller's current project (the default scope)")
    serve.add_argument("--policy", type=Path, help="policy file: clients, grants and switches (docs/deployment.md)")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    serve.add_argument("--host", help="HTTP bind address (default: 127.0.0.1, loopback)")
    serve.add_argument("--port", type=int, help="HTTP port (default: 8765)")
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        help="extra Host header value accepted over HTTP (DNS-rebinding protection), e.g. mcp.example.com",
    )
    serve.add_argument(
        "--allowed-origin", action="append", default=[], help="extra Origin accepted over HTTP, e.g. https://x.test"
    )
    serve.add_argument(
        "--public-url",
        help="HTTP: the URL clients reach /mcp at, e.g. https://mcp.example.com/mcp behind a TLS proxy "
        "(its host is accepted like --allowed-host, and its origin like --allowed-origin)",
    )
    serve.add_argument(
        "--cursor-secret-file",
        type=Path,
        help="file holding the secret that signs cursors; share it between replicas (default: STORY_GRAPH_CURSOR_SECRET"
        " or a random per-process secret)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="HTTP: worker processes sharing the port (about one CPU core each; needs --policy and a cursor secret)",
    )
    serve.add_argument(
        "--busy-timeout",
        type=float,
        metavar="SECONDS",
        help="how long a read waits for another process's write lock before the call fails with read_failed "
        "(default: 5)",
    )

    db = _command(commands, "db", "create, fill, export and inspect a database").add_subparsers(
        dest="db_command", required=True
    )
    migrate = _command(db, "migrate", "create a database or upgrade it to the current schema")
    migrate.add_argument("--db", type=_database, required=True)
    imp = _command(
        db,
        "import",
        "load history in one transaction: an interchange file, a GoodBuddy app database or a memory-server graph",
    )
    imp.add_argument("--db", type=_database, required=True)
    imp.add_argument(
        "--from",
        dest="source",
        choices=("jsonl", "goodbuddy", "memory-jsonl"),
        default="jsonl",
        help="what FILE is: our interchange JSON Lines (default), a GoodBuddy assistant database (opened"
        " read-only), or the reference memory server's memory.json(l)",
    )
    imp.add_argument("--project", help="memory-jsonl: the project the graph goes into (created when new)")
    imp.add_argument(
        "file", type=_input_file, metavar="FILE", help="what to import (- reads JSON Lines from standard input)"
    )
    imp.add_argument("--dry-run", action="store_true", help="check every line, links included, and write nothing")
    _progress_options(imp)
    exp = _command(db, "export", "write the graph as a JSON Lines interchange file (stdout without FILE)")
    exp.add_argument("--db", type=_database, required=True)
    exp.add_argument(
        "file", type=_output_file, nargs="?", metavar="FILE", help="where to write (standard output without it, or -)"
    )
    _progress_options(exp)
    stats = _command(db, "stats", "print schema version, data revision and counts per object type and scope")
    stats.add_argument("--db", type=_database, required=True)
    optimize = _command(db, "optimize", "merge the search index into one b-tree (searches then read one, not several)")
    optimize.add_argument("--db", type=_database, required=True)
    _progress_options(optimize)

    policy = _command(commands, "policy", "make bearer tokens and check policy files").add_subparsers(
        dest="policy_command", required=True
    )
    _command(policy, "new-token", "make a random bearer token; print it and the line for the policy file")
    _command(policy, "hash-token", "read a token from stdin and print its sha256 for token_sha256")
    check = _command(policy, "check", "validate a policy file and summarise its clients and switches")
    check.add_argument("file", type=Path)
    check.add_argument("--db", type=_database, help="also check that every granted project is in this database")

    demo = _command(commands, "demo", "write the bundled demo graph to a new database file")
    demo.add_argument("path", type=_path)
    for group in (commands, db, policy):
        _named_choices(group)
    return parser


def _interval(text: str) -> float:
    """Seconds between progress lines: a finite number, 0 or more (0: a line at every check; `nan` printed none)."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, 0 or more, not {text!r}")
    return seconds


def _database(text: str) -> Path:
    """A database path; an empty one (`--db "$DB"` with DB unset) is `.`, the working directory, to pathlib."""
    if not text:
        raise argparse.ArgumentTypeError("empty: give the database file's path")
    return _path(text)


STDIN: Final = Path("/dev/stdin")


def _input_file(text: str) -> Path:
    """`-` is standard input (`db export ... | db import --db copy.db -`); it read a file named `-`, or failed."""
    return STDIN if text == "-" else _path(text)


def _output_file(text: str) -> Path | None:
    """`-` is standard output, as for most commands that write a file; a file named `-` is `./-`."""
    return None if text == "-" else _path(text)


def _path(text: str) -> Path:
    """A path whose symbolic links end somewhere: a loop (a.db -> b.db -> a.db) ended `db migrate`, `db export`
    and `demo` in a traceback (pathlib's resolve raises RuntimeError on it before Python 3.13)."""
    path = Path(text)
    try:
        path.resolve()
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{text} is a loop of symbolic links; point it at a file") from None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise argparse.ArgumentTypeError(f"{text} is a loop of symbolic links; point it at a file") from None
    return path


def _progress_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--quiet", action="store_true", help="print no progress on stderr")
    command.add_argument(
        "--progress-every",
        type=_interval,
        default=DEFAULT_EVERY_SECONDS,
        metavar="SECONDS",
        help="when stderr is not a terminal, print a progress line every SECONDS"
        f" (default {DEFAULT_EVERY_SECONDS:g}; on a terminal a bar is drawn instead)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    if sys.stderr is None:
        # Started with stderr closed (`2>&-`): messages go nowhere, as asked. Without this, progress ended the
        # import in a traceback nobody saw (exit status 1), and print() put error lines into stdout, the export's data.
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the command's usage, not the program's: `db stats --db g.db extra` is a mistake in `db stats`
        args.parser_of_command.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "serve":  # the servers handle their own signals
        return _main(args, _Interrupted())
    interrupted = _Interrupted()
    previous = signal.signal(signal.SIGINT, interrupted.on_sigint)
    try:
        return _main(args, interrupted)
    finally:
        signal.signal(signal.SIGINT, previous)


def _main(args: argparse.Namespace, interrupted: _Interrupted) -> int:
    try:
        return _run(args)
    except StoreError as exc:
        if interrupted.seen:  # Ctrl-C inside SQLite surfaces as its error ("user-defined function raised ...")
            return _interrupted(args)
        # One clear line, never a traceback: these are the user's inputs, not our bugs.
        print(f"story-graph-mcp: {exc}", file=sys.stderr)
        return 2
    except Interrupted as exc:  # the command says what it kept
        print(f"story-graph-mcp: interrupted; {exc.note}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        return _interrupted(args)


class _Interrupted:
    """Remembers a Ctrl-C: SQLite turns a KeyboardInterrupt raised in a Python function it calls (the search
    index's gram function) into its own error, which would otherwise be reported as the import's failure."""

    def __init__(self) -> None:
        self.seen = False

    def on_sigint(self, _signum: int, _frame: FrameType | None) -> None:
        self.seen = True
        raise KeyboardInterrupt


def _interrupted(args: argparse.Namespace) -> int:
    command = getattr(args, "db_command", None)
    note = ""
    if command == "import":
        note = "the import wrote nothing"
    elif command == "optimize":
        note = "the search index is as it was"
    elif command == "export" and args.file is not None:  # interrupted before it wrote (after: Interrupted)
        note = f"{args.file} was left as it was" if args.file.exists() else f"{args.file} was not written"
    print(f"story-graph-mcp: interrupted{'; ' + note if note else ''}", file=sys.stderr)
    return 130


def _run(args: argparse.Namespace) -> int:
    if args.command == "serve":
        # Start-up builds ~90,000 long-lived objects (the SDK's and our pydantic models): collecting while they
        # are made only costs time. settle_heap() turns the collector on before the server serves.
        gc.disable()
        try:
            from server.serve import serve

            return serve(args)
        finally:
            gc.enable()
    if args.command == "policy":
        from server.policy import policy_command

        return policy_command(args.policy_command, getattr(args, "file", None), getattr(args, "db", None))
    if args.command == "demo":
        from server.store.demo import write_demo

        write_demo(args.path)
        print_report(f"wrote the demo graph to {args.path}")
        return 0
    from server.store import exporter, migrate, stats

    if args.db_command == "migrate":
        before, after = migrate.migrate(args.db)
        print_report(
            f"{args.db}: schema version {before} -> {after}" if before != after else f"{args.db}: up to date ({after})"
        )
    elif args.db_command == "import":
        _import(args)
    elif args.db_command == "export":
        progress = Progress.to_stderr("export", every=args.progress_every, quiet=args.quiet)
        count = exporter.export_file(args.db, args.file, progress=progress)
        if args.file is not None:  # on standard output the lines are the data: nothing may follow them there
            print_report(f"exported {count} lines from {args.db} to {args.file}")
    elif args.db_command == "stats":
        print_out(stats.stats_text(args.db))
    elif args.db_command == "optimize":
        from server.store.optimize import optimize

        progress = Progress.to_stderr("optimize", every=args.progress_every, quiet=args.quiet)
        print_report(str(optimize(args.db, progress)))
    return 0


def _import(args: argparse.Namespace) -> None:
    from server.store import goodbuddy, importer, memory_graph

    progress = Progress.to_stderr("import", every=args.progress_every, quiet=args.quiet)
    dry_run = args.dry_run
    notes: list[str] = []
    if args.source == "memory-jsonl":
        if not args.project:
            raise StoreError("--from memory-jsonl needs --project P: the project the memory graph goes into")
        report, notes = memory_graph.import_memory_graph(
            args.db, args.file, args.project, dry_run=dry_run, progress=progress
        )
    elif args.project:
        raise StoreError(f"--project only applies to --from memory-jsonl, not --from {args.source}")
    elif args.source == "goodbuddy":
        if args.file == STDIN:  # SQLite opens files only: /dev/stdin read as one is "not a GoodBuddy database"
            raise StoreError("--from goodbuddy reads the app's database file: name it (- is for JSON Lines only)")
        report, notes = goodbuddy.import_goodbuddy(args.db, args.file, dry_run=dry_run, progress=progress)
    else:
        report = importer.import_file(args.db, args.file, dry_run=dry_run, progress=progress)
        if not report.total and not report.unchanged:  # a failed export or a wrong path, more likely than intended
            notes = [f"{args.file} holds no objects (it is empty, or only blank lines): nothing to import"]
    print_report("\n".join([str(report), *(f"note: {note}" for note in notes)]))


if __name__ == "__main__":
    sys.exit(main())
