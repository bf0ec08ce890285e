"""Helpers the benchmark scripts share: statistics, machine state, processes, cached graphs and MCP clients.

The scripts drive the server only through its public surfaces: the MCP wire (stdio and HTTP), the command line
(`python -m server serve|db|demo`) and the uvicorn factory `server.http:create_app`. The one exception is the
in-process client, which builds the same server object the tests use (`in_process_client`).
"""

from __future__ import annotations

import argparse
import fcntl
import math
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

if TYPE_CHECKING:
    from mcp import Client

    from server.reader.db import Database

BENCH_DIR: Final = Path(__file__).resolve().parent
REPO: Final = BENCH_DIR.parent
PYTHON: Final = sys.executable
CURSOR_SECRET: Final = "bench-cursor-secret-0123456789abcdef"
"""Shared by every server a benchmark starts, so a cursor from one is accepted by the others."""
BIG_PROJECT: Final = "big"
SMALL_SCOPE: Final = {"kind": "projects", "projectIds": ["small"]}
SEARCH: Final = "story_graph_search"
CONTEXT: Final = "story_graph_get_context"
READ_SOURCE: Final = "story_graph_read_source"
FLOOR_TOOL: Final = "floor_search"
SELECTIVE_QUERIES: Final = ("xylophone", "麒麟", "Kafka", "Elasticsearch", "InfluxDB", "Jenkins")
"""Few matches at every size (the markers of make_large_graph and the planted stories)."""


# --- statistics -----------------------------------------------------------------------------------------------


def p50(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def p95(values: Sequence[float]) -> float:
    """Nearest rank: the smallest value with at least 95 % of the values at or below it."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def fmt_ms(value: float) -> str:
    if math.isnan(value):
        return "—"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def fmt_ratio(ours: float, floor: float) -> str:
    if math.isnan(ours) or math.isnan(floor) or floor <= 0:
        return "—"
    return f"{ours / floor:,.1f}×"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def positive_ints(text: str) -> list[int]:
    """'1,4,16' -> [1, 4, 16] (an argparse type)."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got {text!r}")
    return values


def parse_sizes(text: str) -> list[int]:
    """'10k,100k,1M' -> [10000, 100000, 1000000]."""
    sizes = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        scale = 1_000_000 if part.endswith("m") else 1_000 if part.endswith("k") else 1
        sizes.append(int(float(part.rstrip("mk")) * scale))
    return sizes


def size_label(objects: int) -> str:
    if objects >= 1_000_000 and objects % 1_000_000 == 0:
        return f"{objects // 1_000_000}M"
    if objects >= 1_000 and objects % 1_000 == 0:
        return f"{objects // 1_000}k"
    return f"{objects:,}"


# --- processes and memory -------------------------------------------------------------------------------------


def _status_kib(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def rss_kib(pid: int) -> int:
    """Resident set size now (0 when the process is gone or /proc is absent)."""
    return _status_kib(pid, "VmRSS")


def peak_rss_kib(pid: int) -> int:
    """The process's peak resident set size so far (VmHWM)."""
    return _status_kib(pid, "VmHWM")


def _parent_map() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            parents[int(entry)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    return parents


def process_tree(root: int) -> list[int]:
    """`root` and all its descendants that are alive now."""
    parents = _parent_map()
    tree = [root]
    for pid in tree:
        tree.extend(child for child, parent in parents.items() if parent == pid)
    return [pid for pid in tree if pid == root or pid in parents]


def children_of(pid: int) -> set[int]:
    return {child for child, parent in _parent_map().items() if parent == pid}


def tree_rss_kib(root: int) -> int:
    return sum(rss_kib(pid) for pid in process_tree(root))


def _name_and_cpu_ticks(pid: int) -> tuple[str, int] | None:
    """The process's name and CPU time so far (user + system, in clock ticks); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            head, tail = stat.read().rsplit(")", 1)
        fields = tail.split()
        return head.split("(", 1)[1], int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds used so far by `root` and its live descendants (a uvicorn supervisor and its workers)."""
    ticks = sum(found[1] for pid in process_tree(root) if (found := _name_and_cpu_ticks(pid)) is not None)
    return ticks / _clock_ticks()


def _clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def byte_compiled(checkout: Path = REPO) -> None:
    """Write the byte code of a checkout's `server` package, as installing the wheel does (pip compiles every
    module). A server started from a checkout under PYTHONDONTWRITEBYTECODE (set on this machine), or whose cached
    byte code is older than its sources, compiles each module it imports from source at every start: ~60 modules,
    0.27 s of CPU at 1M (docs/performance.md, "Start-up, session 14") that an installed server does not spend, and
    that the floor (one small script) hardly has."""
    import compileall

    if not compileall.compile_dir(checkout / "server", quiet=2):
        raise RuntimeError(f"could not byte-compile {checkout / 'server'}")


def server_env(**extra: str) -> dict[str, str]:
    """The environment for servers we start: this checkout importable, the shared cursor secret."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), str(BENCH_DIR), env.get("PYTHONPATH", "")]))
    env["STORY_GRAPH_CURSOR_SECRET"] = CURSOR_SECRET
    env.update(extra)
    return env


# --- what else the machine was doing ---------------------------------------------------------------------------


@dataclass
class MachineState:
    at: float
    load: tuple[float, float, float]
    cpu_busy: int
    cpu_total: int
    own_cpu_s: float
    """CPU seconds of this process and of its children already waited for."""
    process_ticks: dict[int, tuple[str, int]] = field(default_factory=dict)


def machine_state() -> MachineState:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan, math.nan, math.nan)
    busy = total = 0
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
        total = sum(values)
        busy = total - values[3] - (values[4] if len(values) > 4 else 0)  # minus idle and iowait
    except (OSError, ValueError, IndexError):
        pass
    ticks: dict[int, tuple[str, int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit() and (found := _name_and_cpu_ticks(int(entry))) is not None:
            ticks[int(entry)] = found
    own = os.times()
    own_cpu = own.user + own.system + own.children_user + own.children_system
    return MachineState(time.time(), load, busy, total, own_cpu, ticks)


def machine_report(before: MachineState, after: MachineState, ours: Iterable[int] = ()) -> list[str]:
    """Load average before/after, how busy the CPUs were, how much of that was not this benchmark, and the other
    processes that used the most CPU (of those still running at the end)."""
    lines = [
        f"machine: {os.cpu_count()} CPUs; load average before {_load(before.load)}, after {_load(after.load)}",
    ]
    mine: set[int] = set()
    for pid in {os.getpid(), *ours}:
        mine.update(process_tree(pid))
    hz = _clock_ticks()
    seconds = max(after.at - before.at, 1e-9)
    children = sum(
        ticks - before.process_ticks.get(pid, (name, 0))[1]
        for pid, (name, ticks) in after.process_ticks.items()
        if pid in mine and pid != os.getpid()
    )
    ours_cpu = after.own_cpu_s - before.own_cpu_s + children / hz
    if after.cpu_total > before.cpu_total:
        busy = 100 * (after.cpu_busy - before.cpu_busy) / (after.cpu_total - before.cpu_total)
        others_cpu = max(0.0, (after.cpu_busy - before.cpu_busy) / hz - ours_cpu)
        lines.append(
            f"over {seconds:.0f} s the CPUs were {busy:.0f} % busy; this benchmark and its servers used "
            f"{ours_cpu:.0f} s of CPU, everything else {others_cpu:.0f} s "
            f"({100 * others_cpu / seconds:.0f} % of one CPU)"
        )
    others = []
    for pid, (name, ticks) in after.process_ticks.items():
        used = ticks - before.process_ticks.get(pid, (name, 0))[1]
        if pid not in mine and used > 0:
            others.append((used / hz, name, pid))
    others.sort(reverse=True)
    if others:
        busiest = ", ".join(f"{name}[{pid}] {used:.1f} s" for used, name, pid in others[:5])
        lines.append(f"busiest other processes still running at the end: {busiest}")
    return lines


def _load(load: tuple[float, float, float]) -> str:
    return " / ".join(f"{v:.2f}" for v in load)


def machine_header() -> str:
    memory = 0.0
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            memory = int(info.readline().split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    import sqlite3

    return (
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}; {os.cpu_count()} CPUs, {memory:.0f} GiB; Python "
        f"{sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}; commit {_commit()}"
    )


def _commit() -> str:
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True, check=False
        )
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


# --- graphs ---------------------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    configured = os.environ.get("STORY_GRAPH_BENCH_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "story-graph-mcp" / "bench"


def add_graph_options(parser: argparse.ArgumentParser) -> None:
    """The options of every script that takes generated graphs from the cache (see `ensure_graph`)."""
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=default_cache_dir(),
        help="where generated graphs are kept (default: $STORY_GRAPH_BENCH_CACHE or ~/.cache/story-graph-mcp/bench)",
    )
    parser.add_argument(
        "--source-code-points", type=int, help="size of the planted big source of generated graphs (default 10,000,000)"
    )


def run_cli(args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`python -m server ARGS` in this checkout; raises with its stderr when it fails."""
    done = subprocess.run(
        [PYTHON, "-m", "server", *args],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        text=True,
        check=False,
        **kwargs,
    )
    if done.returncode != 0:
        raise RuntimeError(f"python -m server {' '.join(args)} failed ({done.returncode}):\n{done.stderr.strip()}")
    return done


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@contextmanager
def cache_lock(path: Path) -> Iterator[None]:
    """One writer of a cached file at a time: benchmarks run side by side (several checkouts, one cache) would
    otherwise write the same temporary file at once. A run that waited finds the file written."""
    with path.with_name(path.name + ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_graph(
    cache_dir: Path,
    objects: int,
    *,
    seed: int | None = None,
    source_code_points: int | None = None,
    say: Callable[[str], None] | None = None,
) -> Path:
    """A generated graph of `objects` objects from the cache, built first when missing, then brought to the current
    schema with `python -m server db migrate` (so a cached graph follows new migrations)."""
    import make_large_graph as generator

    say = say or (lambda message: print(message, file=sys.stderr, flush=True))

    seed = generator.DEFAULT_SEED if seed is None else seed
    code_points = generator.DEFAULT_SOURCE_CODE_POINTS if source_code_points is None else source_code_points
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"graph-{objects}-seed{seed}-src{code_points}-v{generator.GRAPH_VERSION}.db"
    with cache_lock(path):  # held through the migration too
        _build_graph(path, objects, seed, code_points, say)
        run_cli(["db", "migrate", "--db", str(path)])
    return path


def _build_graph(path: Path, objects: int, seed: int, code_points: int, say: Callable[[str], None]) -> None:
    if not path.exists():
        building = path.with_name(path.name + ".building")
        _remove_db(building)
        say(f"building {objects:,} objects into {path} (cached for later runs) ...")
        started = time.perf_counter()
        command = [PYTHON, str(BENCH_DIR / "make_large_graph.py"), str(building), "--objects", str(objects)]
        command += ["--seed", str(seed), "--source-code-points", str(code_points)]
        done = subprocess.run(command, cwd=REPO, env=server_env(), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            _remove_db(building)
            raise RuntimeError(f"make_large_graph failed:\n{done.stderr.strip()}")
        os.replace(building, path)
        built = [line for line in done.stdout.splitlines() if line.startswith("built ")]
        path.with_name(path.name + ".txt").write_text(done.stdout)
        say(f"built in {time.perf_counter() - started:.0f} s ({path.stat().st_size / 2**20:,.0f} MiB): {built[-1:]}")


def graph_summary(path: Path) -> str:
    """'N objects + M planted' from the build output kept beside a cached graph ('' when absent)."""
    try:
        text = path.with_name(path.name + ".txt").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        if line.startswith("built ") and "(" in line:
            return line.split("(", 1)[1].split(")", 1)[0]
    return ""


def ensure_demo(cache_dir: Path) -> Path:
    """The bundled demo graph, written by `python -m server demo` (rewritten every time: it is tiny)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / "demo.db"
    _remove_db(path)
    run_cli(["demo", str(path)])
    return path


# --- MCP clients ----------------------------------------------------------------------------------------------


@asynccontextmanager
async def stdio_client_for(args: Sequence[str], errlog: TextIO) -> AsyncIterator[tuple[Client, int | None]]:
    """A real MCP client on the pipes of `python ARGS` (a child process); yields the client and the child's pid."""
    from mcp import Client, StdioServerParameters  # here, not at the top: the SDK costs ~45 MiB of RSS to import
    from mcp.client.stdio import stdio_client

    before = children_of(os.getpid())
    params = StdioServerParameters(command=PYTHON, args=list(args), cwd=str(REPO), env=server_env())
    async with Client(stdio_client(params, errlog=errlog)) as client:
        started = children_of(os.getpid()) - before
        yield client, min(started) if started else None


def ours_stdio_args(db: Path, project: str = BIG_PROJECT) -> list[str]:
    return ["-m", "server", "serve", "--db", str(db), "--project", project]


def floor_stdio_args(db: Path) -> list[str]:
    return [str(BENCH_DIR / "floor_server.py"), "--db", str(db)]


@asynccontextmanager
async def in_process_client(db: Path, project: str = BIG_PROJECT) -> AsyncIterator[Client]:
    """Our server in this process (as tests/support.py builds it), behind a real in-memory MCP session."""
    from mcp import Client

    from server.app import StaticAccess, build_server
    from server.contracts.common import Grant
    from server.reader.cursor import CursorCodec

    server = build_server(db, StaticAccess(Grant(default_project=project)), CursorCodec(CURSOR_SECRET.encode()))
    async with Client(server) as client:
        yield client


async def call_structured(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool; the structured result, or RuntimeError naming the tool error."""
    result = await client.call_tool(tool, arguments)
    if result.is_error or result.structured_content is None:
        text = " ".join(getattr(block, "text", "") for block in result.content)[:300]
        raise RuntimeError(f"{tool} {arguments} failed: {text}")
    content: dict[str, Any] = result.structured_content
    return content


# --- load-independent figures ----------------------------------------------------------------------------------


@dataclass
class VmSteps:
    """Counts the SQLite virtual-machine steps of the reader database `db` (reset `count` before what you count)."""

    db: Database
    count: int = 0

    def step(self) -> int:
        self.count += 1
        return 0  # go on


@asynccontextmanager
async def vm_step_counter(path: Path) -> AsyncIterator[VmSteps]:
    """A reader database on one connection whose every statement runs on the connection's thread, under one progress
    handler that counts steps (inline statements would install their own budget handler and go uncounted)."""
    from server.reader.db import Database

    db = await Database.open(path, size=1, inline_steps=0)
    counter = VmSteps(db)
    try:
        async with db.snapshot() as conn:
            await conn.set_progress_handler(counter.step, 1)
        yield counter
    finally:
        await db.close()
