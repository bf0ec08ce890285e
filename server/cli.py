"""The `story-graph-mcp` command: serve the graph, and create, fill, export and inspect databases."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from server.store.errors import StoreError
from server.store.progress import DEFAULT_EVERY_SECONDS, Progress


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="story-graph-mcp", description="A read-only MCP server over a temporal story graph in SQLite."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve the three read-only tools over stdio or Streamable HTTP")
    source = serve.add_mutually_exclusive_group(required=True)
    source.add_argument("--db", type=Path, help="the story graph database (opened read-only)")
    source.add_argument("--demo", action="store_true", help="serve the bundled demo graph")
    serve.add_argument("--project", help="the caller's current project (the default scope)")
    serve.add_argument("--policy", type=Path, help="policy file: clients, grants and switches (docs/deployment.md)")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default: loopback)")
    serve.add_argument("--port", type=int, default=8765, help="HTTP port (default: 8765)")
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
        "(names the resource in 401 responses; its host is accepted like --allowed-host)",
    )
    serve.add_argument(
        "--cursor-secret-file",
        type=Path,
        help="file holding the secret that signs cursors; share it between replicas (default: STORY_GRAPH_CURSOR_SECRET"
        " or a random per-process secret)",
    )

    db = commands.add_parser("db", help="create, fill, export and inspect a database").add_subparsers(
        dest="db_command", required=True
    )
    migrate = db.add_parser("migrate", help="create a database or upgrade it to the current schema")
    migrate.add_argument("--db", type=Path, required=True)
    imp = db.add_parser("import", help="load a JSON Lines interchange file in one transaction")
    imp.add_argument("--db", type=Path, required=True)
    imp.add_argument("file", type=Path)
    imp.add_argument("--dry-run", action="store_true", help="check every line, links included, and write nothing")
    _progress_options(imp)
    exp = db.add_parser("export", help="write the graph as a JSON Lines interchange file (stdout without FILE)")
    exp.add_argument("--db", type=Path, required=True)
    exp.add_argument("file", type=Path, nargs="?")
    _progress_options(exp)
    stats = db.add_parser("stats", help="print schema version, data revision and counts per object type and scope")
    stats.add_argument("--db", type=Path, required=True)

    policy = commands.add_parser("policy", help="make bearer tokens and check policy files").add_subparsers(
        dest="policy_command", required=True
    )
    policy.add_parser("new-token", help="make a random bearer token; print it and the line for the policy file")
    policy.add_parser("hash-token", help="read a token from stdin and print its sha256 for token_sha256")
    check = policy.add_parser("check", help="validate a policy file and summarise its clients and switches")
    check.add_argument("file", type=Path)

    demo = commands.add_parser("demo", help="write the bundled demo graph to a new database file")
    demo.add_argument("path", type=Path)
    return parser


def _progress_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--quiet", action="store_true", help="print no progress on stderr")
    command.add_argument(
        "--progress-every",
        type=float,
        default=DEFAULT_EVERY_SECONDS,
        metavar="SECONDS",
        help="when stderr is not a terminal, print a progress line every SECONDS"
        f" (default {DEFAULT_EVERY_SECONDS:g}; on a terminal a bar is drawn instead)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except StoreError as exc:
        # One clear line, never a traceback: these are the user's inputs, not our bugs.
        print(f"story-graph-mcp: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _run(args: argparse.Namespace) -> int:
    if args.command == "serve":
        from server.serve import serve

        return serve(args)
    if args.command == "policy":
        from server.policy import policy_command

        return policy_command(args.policy_command, getattr(args, "file", None))
    if args.command == "demo":
        from server.store.demo import write_demo

        write_demo(args.path)
        print(f"wrote the demo graph to {args.path}")
        return 0
    from server.store import exporter, importer, migrate, stats

    if args.db_command == "migrate":
        before, after = migrate.migrate(args.db)
        print(
            f"{args.db}: schema version {before} -> {after}" if before != after else f"{args.db}: up to date ({after})"
        )
    elif args.db_command == "import":
        progress = Progress.to_stderr("import", every=args.progress_every, quiet=args.quiet)
        print(importer.import_file(args.db, args.file, dry_run=args.dry_run, progress=progress))
    elif args.db_command == "export":
        progress = Progress.to_stderr("export", every=args.progress_every, quiet=args.quiet)
        exporter.export_file(args.db, args.file, progress=progress)
    elif args.db_command == "stats":
        print(stats.stats_text(args.db))
    return 0


if __name__ == "__main__":
    sys.exit(main())
