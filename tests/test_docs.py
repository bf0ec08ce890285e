"""The docs are a contract: every tool and every error code has its place in docs/tools.md, every command block
marked runnable in README.md and docs/*.md runs, and the numbers and commands the docs quote are the product's.

A runnable block is a ```sh block on the line right after `<!-- runnable -->`. It runs with bash
(`set -euo pipefail`) in a fresh empty directory, with this environment's `story-graph-mcp` first on PATH,
and must exit 0. Mark only blocks that finish on their own and need no network.

A ```json block on the line right after `<!-- example-output: TOOL ARGUMENTS [PATH] -->` shows (trimmed) what
that call returns on the demo graph, and is checked against a real call.

Every `story-graph-mcp …` command line in a ```sh block, every client configuration's `args` that launch it, and
every example a `--help` ends with are parsed by the real argument parser: a flag the docs name must exist.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import all_pages, client_for, demo_db, ok

from server.contracts.errors import ERROR_CODES
from server.settings import INSPECTOR
from server.tools import TOOLS

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
MARKDOWN = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
RUNNABLE = re.compile(r"^<!-- runnable -->\n```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
BIN = Path(sys.executable).parent


def runnable_blocks() -> list[tuple[str, str]]:
    blocks = []
    for path in MARKDOWN:
        text = path.read_text(encoding="utf-8")
        for number, match in enumerate(RUNNABLE.finditer(text), start=1):
            blocks.append((f"{path.relative_to(REPO)}#{number}", match.group(1)))
    return blocks


def test_every_registered_tool_has_a_reference_section() -> None:
    text = (DOCS / "tools.md").read_text(encoding="utf-8")
    for spec in TOOLS:
        assert f"## `{spec.name}`" in text, spec.name
    # README's table of tools names exactly the registered ones ("exactly three tools").
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert re.findall(r"^\| `(story_graph_\w+)` \|", readme, re.MULTILINE) == [spec.name for spec in TOOLS]


def test_every_error_code_is_documented() -> None:
    text = (DOCS / "tools.md").read_text(encoding="utf-8")
    for code in ERROR_CODES:
        assert f"| `{code}` |" in text, code


def test_the_runnable_marker_is_used_where_it_matters() -> None:
    marked = {name.split("#")[0] for name, _ in runnable_blocks()}
    assert {"README.md", "docs/demo.md", "docs/deployment.md"} <= marked
    # A marker must sit right above a ```sh block, or the block would silently not run.
    for path in MARKDOWN:
        text = path.read_text(encoding="utf-8")
        markers = re.findall(r"^<!-- runnable -->$", text, re.MULTILINE)
        assert len(markers) == len(RUNNABLE.findall(text)), path


@pytest.mark.parametrize(("name", "script"), runnable_blocks(), ids=[name for name, _ in runnable_blocks()])
def test_runnable_command_blocks_run(tmp_path: Path, name: str, script: str) -> None:
    assert (BIN / "story-graph-mcp").exists(), "install the project (pip install -e .) to run the docs"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("STORY_GRAPH_CURSOR_SECRET", None)
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, f"{name} failed:\n{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    # Output quoted in a block's comments (`# line`) is what the commands print, where it is not elided.
    quoted = [line.removeprefix("# ") for line in script.splitlines() if line.startswith("# ")]
    for line in quoted:
        if "…" not in line:
            assert line in done.stdout, f"{name}: {line!r} not in the output:\n{done.stdout}"


def test_the_inspector_commands_in_the_docs_are_pinned_and_their_arguments_valid() -> None:
    """docs/clients.md shows the Inspector version CI runs, and every --tool-args-json it shows is accepted by the
    tool's input contract (CI runs the same calls: .ci/conformance.sh)."""
    ci = (REPO / ".ci" / "conformance.sh").read_text(encoding="utf-8")
    assert f'INSPECTOR_PKG="{INSPECTOR}"' in ci
    specs = {spec.name: spec for spec in TOOLS}
    for path in MARKDOWN:
        for block in re.findall(r"^```sh\n(.*?)^```", path.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL):
            for command in re.findall(r"npx[^\n]*@modelcontextprotocol/inspector[^\s]*", block):
                assert command.endswith(INSPECTOR) and " -y " in f" {command} ", (path, command)
    clients = (DOCS / "clients.md").read_text(encoding="utf-8")
    calls = re.findall(r"--tool-name (\w+) \\\n\s+--tool-args-json '([^']+)'", clients)
    assert len(calls) >= 4
    import orjson

    for tool, arguments in calls:
        parsed: dict[str, Any] = orjson.loads(arguments)
        if "as_of" not in parsed:
            specs[tool].input_model.model_validate(parsed)
    # The table of exit codes names the same calls CI makes.
    for arguments in re.findall(r"--tool-args-json '([^']+)'", ci.split("call()")[1]):
        if '"cursor"' not in arguments:
            assert f"`{arguments}`" in clients, arguments


DECISION_B = {"type": "entity", "id": "ent-decision-b"}


@pytest.mark.anyio
async def test_the_demo_numbers_quoted_in_the_docs_are_the_demo_graphs(tmp_path: Path) -> None:
    demo = (DOCS / "demo.md").read_text(encoding="utf-8")
    tools = (DOCS / "tools.md").read_text(encoding="utf-8")

    async def timeline(client: Any, ref: dict[str, str]) -> tuple[int, int]:
        args = {"object_ref": ref, "mode": "timeline", "page_size": 50}
        pages = await all_pages(client, "story_graph_get_context", args)
        objects = {(i["object_ref"]["type"], i["object_ref"]["id"], i["result_id"]) for p in pages for i in p["items"]}
        return pages[-1]["undated_count"], len(objects)

    async with client_for(demo_db(tmp_path)) as client:
        found = await ok(client, "story_graph_search", {"query": "会话缓存", "page_size": 50})
        line = await timeline(client, {"type": "story_line", "id": "sl-atlas-cache"})
        decision_b = await timeline(client, DECISION_B)
        decision_a = await timeline(client, {"type": "entity", "id": "ent-decision-a"})
        decision_b_now = await ok(client, "story_graph_get_context", {"object_ref": DECISION_B})
        story_args = {"object_ref": {"type": "story", "id": "story-atlas-session-cache"}, "mode": "timeline"}
        story = await ok(client, "story_graph_get_context", {**story_args, "page_size": 50})
    items = found["items"]
    distinct = {(i["object_ref"]["type"], i["object_ref"]["id"]) for i in items}
    assert f"returns {len(items)} items (`page.total_count` is {found['page']['total_count']})" in demo
    assert f"for {len(distinct)}\nobjects" in demo
    assert f"{line[0]} of the story line's {line[1]} objects; {decision_b[0]} of the {decision_b[1]} for" in demo
    assert f"`undated_count` {decision_a[0]} of its {decision_a[1]} objects" in tools
    # The work status a reader sees on Decision B, quoted twice; and the feature story's timeline, told in words.
    work_status = decision_b_now["header"]["work_status"]
    assert f'`work_status: "{work_status}"`' in demo and f'`work_status`\n`"{work_status}"`' in demo
    assert "work_status: null" not in demo
    kinds = [(i["object_ref"]["type"], i["undated"]) for i in story["items"]]
    words = {2: "two", 6: "six", 8: "eight"}
    events, dated = kinds.count(("event", False)) + kinds.count(("event", True)), kinds.count(("event", False))
    threads = kinds.count(("story", False)) - 1
    assert f"its {words[threads]} threads and its {words[events]} events" in demo, kinds
    assert f"{words[dated]}\ndated ones" in demo and f"(`undated_count` {story['undated_count']})" in demo, kinds


EXAMPLE_OUTPUT = re.compile(
    r"^<!-- example-output: (\w+) (\{[^\n]*\})(?: ([\w.]+))? -->\n```json\n(.*?)^```", re.MULTILINE | re.DOTALL
)
ELIDED = "…"


def elision_mismatches(shown: Any, real: Any, path: str = "") -> list[str]:
    """Where a trimmed example is not what the tool returns. An example may leave keys out, end a list with
    "…" (a prefix of the real list), and put "…" inside a string (the real text starts and ends like it);
    everything it does show must be exactly what the tool returns, in the same order."""
    if isinstance(shown, dict):
        if not isinstance(real, dict):
            return [f"{path}: {real!r} is not an object"]
        problems = [f"{path}.{key}: not in the output" for key in shown if key != ELIDED and key not in real]
        for key, value in shown.items():
            if key != ELIDED and key in real:
                problems += elision_mismatches(value, real[key], f"{path}.{key}")
        return problems
    if isinstance(shown, list):
        if not isinstance(real, list):
            return [f"{path}: {real!r} is not a list"]
        trimmed = ELIDED in shown
        listed = shown[: shown.index(ELIDED)] if trimmed else shown
        if len(real) < len(listed) or (not trimmed and len(real) != len(listed)):
            return [f"{path}: {len(real)} elements, the example shows {len(shown)}"]
        return [p for i, value in enumerate(listed) for p in elision_mismatches(value, real[i], f"{path}[{i}]")]
    if isinstance(shown, str) and ELIDED in shown and shown != real:
        head, _, tail = shown.partition(ELIDED)
        fits = isinstance(real, str) and real.startswith(head) and real.endswith(tail)
        return [] if fits else [f"{path}: {real!r} is not {shown!r}"]
    return [] if shown == real else [f"{path}: the tool returns {real!r}, the example shows {shown!r}"]


@pytest.mark.anyio
async def test_the_example_outputs_in_tools_md_are_what_the_tools_return(tmp_path: Path) -> None:
    """Each ```json block marked `<!-- example-output: TOOL ARGUMENTS [PATH] -->` is checked against a real
    call on the demo graph (current project atlas): a developer copying a call from the reference must see it."""
    import orjson

    examples = EXAMPLE_OUTPUT.findall((DOCS / "tools.md").read_text(encoding="utf-8"))
    assert len(examples) >= 4
    async with client_for(demo_db(tmp_path)) as client:
        for tool, arguments, path, block in examples:
            real: Any = await ok(client, tool, orjson.loads(arguments))
            for key in path.split(".") if path else []:
                real = real[int(key)] if key.isdigit() else real[key]
            problems = elision_mismatches(orjson.loads(block), real)
            assert not problems, f"{tool} {arguments} {path}:\n" + "\n".join(problems)


SHELL_BREAKS = {"&&", "||", "|", ";", ">", ">>", "<", "2>", "2>&1", "&"}


def documented_commands() -> list[tuple[str, list[str]]]:
    """Every `story-graph-mcp …` (or `python -m server …`) command line in a ```sh block of README.md and docs/*.md,
    continuations joined and comments dropped, up to the first shell operator: what a reader copies."""
    import shlex

    import orjson

    found = []
    for path in MARKDOWN:
        for block in re.findall(r"^```sh\n(.*?)^```", path.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL):
            for line in block.replace("\\\n", " ").splitlines():
                code = re.sub(r"(^|\s)#.*", "", line)
                if "[" in code:  # a usage line with optional parts (`[--host H]`), not a command
                    continue
                words = shlex.split(code.replace("$(", "").replace("…", ""))
                for start, word in enumerate(words):
                    program = word.endswith("/story-graph-mcp") or word == "story-graph-mcp"
                    if program or (word == "-m" and words[start + 1 : start + 2] == ["server"]):
                        rest = words[start + (1 if program else 2) :]
                        cut = next((i for i, w in enumerate(rest) if w in SHELL_BREAKS or w.startswith(">")), None)
                        found.append((f"{path.relative_to(REPO)}: {line.strip()}", rest[:cut]))
                        break
        # Client configurations launch it with a command and its arguments.
        for command, arguments in re.findall(
            r'"command": "([^"]*story-graph-mcp)",\s*"args": (\[[^\]]*\])', path.read_text(encoding="utf-8")
        ):
            found.append((f"{path.relative_to(REPO)}: {command} {arguments}", orjson.loads(arguments)))
    return found


def help_examples() -> list[tuple[str, list[str]]]:
    """The example lines every `--help` ends with (server/cli.py EXAMPLES), parsed the same way."""
    import shlex

    from server.cli import EXAMPLES

    found = []
    for name, text in EXAMPLES.items():
        for line in text.replace("\\\n", " ").splitlines():
            code = re.sub(r"(^|\s)#.*", "", line)
            for part in code.split("&&"):
                words = shlex.split(part)
                if words[:1] == ["story-graph-mcp"] and "COMMAND" not in words:
                    cut = next((i for i, w in enumerate(words) if w in SHELL_BREAKS), None)
                    found.append((f"{name} --help: {part.strip()}", words[1:cut]))
    return found


def test_every_documented_command_line_is_accepted_by_the_cli() -> None:
    """A flag or command the docs name must exist, with a value of the right kind: each command line shown is
    parsed by the real argument parser (nothing runs). Runnable blocks are also run; this covers the rest
    (deployment examples, client launch commands, `--help` pointers)."""
    import contextlib
    import io

    from server.cli import _parser

    commands = documented_commands()
    assert len(commands) >= 40, commands
    examples = help_examples()
    assert len(examples) >= 15, examples
    commands += examples
    bad = []
    for where, argv in commands:
        if argv in ([], ["--version"]) or "--help" in argv:
            continue
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                _, unknown = _parser().parse_known_args(argv)
        except SystemExit:
            # A line that elides arguments (`serve --transport http … --cursor-secret-file F`) may leave out required
            # ones; what it does show must still be right.
            required = "arguments are required" in said.getvalue() or "is required" in said.getvalue()
            if not ("…" in where and required):
                bad.append(f"{where} ({said.getvalue().strip().splitlines()[-1]})")
            continue
        if unknown:
            bad.append(f"{where} (unknown: {' '.join(unknown)})")
    assert not bad, "\n".join(bad)


def test_every_link_between_the_docs_reaches_its_file_and_heading() -> None:
    """A relative link (`[performance.md](performance.md#http-throughput)`) must name a file that exists and, with a
    fragment, a heading in it (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens)."""

    def anchors(path: Path) -> set[str]:
        text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
        headings = re.findall(r"^#+ (.*)$", text, re.MULTILINE)
        return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}

    broken = []
    for path in MARKDOWN:
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
            if re.match(r"\w+://", target):
                continue
            file, _, fragment = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                broken.append(f"{path.relative_to(REPO)}: {target} (no such file)")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                broken.append(f"{path.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_error_code_in_tools_md_is_one_the_server_has() -> None:
    """The other direction of test_every_error_code_is_documented: a code the errors table names (or one it kept
    after a rename) must be one the server can send, or an agent would wait for it in vain."""
    section = (DOCS / "tools.md").read_text(encoding="utf-8").split("<!-- section: errors -->")[1]
    listed = re.findall(r"^\| `(\w+)` \| ", section.split("| code | when |")[1], re.MULTILINE)
    assert listed == list(ERROR_CODES)


def argument_tables() -> dict[str, dict[str, tuple[str, str]]]:
    """Each tool's `### Arguments` table in docs/tools.md: argument name → (type column, default column)."""
    text = (DOCS / "tools.md").read_text(encoding="utf-8")
    tables = {}
    for spec in TOOLS:
        section = text.split(f"<!-- section: {spec.name} -->")[1].split(f"<!-- /section: {spec.name} -->")[0]
        table = section.split("### Arguments")[1].split("\n\n")[1]
        rows = [row.split(" | ") for row in table.splitlines()[2:]]
        tables[spec.name] = {row[0].strip("| `"): (row[1], row[2]) for row in rows}
    return tables


def test_the_argument_tables_in_tools_md_are_the_input_schemas() -> None:
    """Every argument a tool's table lists, with its range and default, is the one its listed input schema has
    (what a client validates against), and the table lists every argument."""
    for spec in TOOLS:
        schema = spec.input_model.model_json_schema(by_alias=True)
        documented = argument_tables()[spec.name]
        assert set(documented) == set(schema["properties"]), spec.name
        for name, (kind, default) in documented.items():
            prop = schema["properties"][name]
            value = next((b for b in prop.get("anyOf", []) if b != {"type": "null"}), prop)
            where = f"{spec.name}.{name}: {kind} | {default}"
            assert (default == "required") == (name in schema["required"]), where
            if default != "required":
                shown = default.strip("`").replace(",", "")
                expected = prop.get("default")
                nothing = ("none", "all", "current project")
                assert shown == str(expected) if expected is not None else shown in nothing, where
            bounds = re.search(r"(\d[\d,]*)–(\d[\d,]*)", kind)
            if bounds is None:
                continue
            low, high = (int(b.replace(",", "")) for b in bounds.groups())
            if kind.startswith("integer"):
                assert (value["minimum"], value["maximum"]) == (low, high), where
            elif kind.startswith("string"):
                assert (value["minLength"], value["maxLength"]) == (low, high), where
            else:  # an object_ref: its id
                ref = schema["$defs"]["ObjectRef"]["properties"]["id"]
                assert "id " in kind and (ref["minLength"], ref["maxLength"]) == (low, high), where


def test_the_limits_quoted_in_tools_md_are_the_constants() -> None:
    """A number docs/tools.md quotes for a cap or a limit is the constant the code uses (a changed constant must
    change the reference an agent reads)."""
    from server.contracts.common import (
        COVERAGE_LIST_LIMIT,
        COVERAGE_TEXT_LIMIT,
        MAX_RESPONSE_BYTES,
        SOURCE_REFERENCES_LISTED,
    )
    from server.contracts.source import SOURCE_COVERAGE_BYTES, SOURCE_COVERAGE_LIST_LIMIT
    from server.reader.context_header import (
        DESCRIPTION_LIMIT,
        GAP_REFS,
        HEADER_LIMIT,
        HEADER_LISTS_BYTES,
        LABEL_LIMIT,
        REASON_LIMIT,
    )
    from server.reader.context_summary import LISTED_SCOPES_READ
    from server.reader.objects import SUMMARY_TITLE_LIMIT
    from server.reader.scope import READABLE_SCOPES_LISTED
    from server.reader.search import TOTAL_CAP
    from server.reader.search_items import EVOLUTION_LIMIT
    from server.reader.search_query import MAX_EXACT_TERMS, MAX_RANGE_MONTHS
    from server.reader.source_rows import CARRYING_LISTED, VERSION_LIST_LIMIT
    from server.tools import context, search, search_notes

    words = {8: "eight", 10: "ten"}
    quoted = [
        f"would exceed {MAX_RESPONSE_BYTES:,} bytes",
        f"byte budget ({context.MAX_ITEMS_BYTES:,} bytes, less what the frame needs)",
        f"in id\norder, at most {SOURCE_REFERENCES_LISTED} of them",
        f"first ids (at most {SOURCE_REFERENCES_LISTED}) with `source_reference_count`",
        f"then\nat most {LISTED_SCOPES_READ} scopes' summaries",
        f"granted active project; the first {READABLE_SCOPES_LISTED})",
        f"each list holds {COVERAGE_LIST_LIMIT} entries as examples",
        f"the last {COVERAGE_LIST_LIMIT} in **review order**",
        f"lists up to {SOURCE_COVERAGE_LIST_LIMIT} entries",
        f"`missing` ranges (each list its first entries that fit in **{SOURCE_COVERAGE_BYTES:,} bytes** of JSON, "
        f"at most {SOURCE_COVERAGE_LIST_LIMIT}, and `processed_count` / `missing_count` how many there are; an entry's "
        f"`fragments` or `ranges` its first {SOURCE_COVERAGE_LIST_LIMIT}",
        f"capped too, at **{COVERAGE_TEXT_LIMIT} code points**",
        f"exact up to {TOTAL_CAP - 1:,} matching items",
        f"lower bound ({TOTAL_CAP:,})",
        f"a range of up to {MAX_RANGE_MONTHS} months",
        f"(for queries of up to {words[MAX_EXACT_TERMS]} terms)",
        f"A query of more than {words[MAX_EXACT_TERMS]} distinct terms",
        f"(at most {words[search_notes.TERMS_CHECKED]}, each a bounded first-page lookup",
        f"| ≤ {search.PREVIEW_LIMIT} code points, led by the best matching field",
        f"starts {search.PREVIEW_HEAD} code points before the match",
        f"the {search.TERMS_WINDOW}-code-point stretch",
        f"longer than {SUMMARY_TITLE_LIMIT} code points its sentences that fit (else its first "
        f"{SUMMARY_TITLE_LIMIT - 1} code points",
        f"(first {EVOLUTION_LIMIT}, and the total)",
        f"`header` (lists capped at {HEADER_LIMIT}, with their totals, and together at "
        f"**{HEADER_LISTS_BYTES:,} bytes**",
        f"(search's `title`, ≤ {LABEL_LIMIT} code points",
        f"description (≤ {DESCRIPTION_LIMIT} code points",
        f"`reason` (≤ {REASON_LIMIT} code points; `reason_is_excerpt`",
        f"the **newest** {HEADER_LIMIT} dated entries",
        f"`threads` (first {HEADER_LIMIT}) and `thread_count`",
        f"`refs`: the first {GAP_REFS} of those objects",
        f"lists them (first {CARRYING_LISTED})",
        f"(versions: first {VERSION_LIST_LIMIT}, oldest first, as many as fit in",
    ]
    text = (DOCS / "tools.md").read_text(encoding="utf-8")
    flat = re.sub(r"\s+", " ", text)
    missing = [phrase for phrase in quoted if re.sub(r"\s+", " ", phrase) not in flat]
    assert not missing, "\n".join(missing)


def test_every_value_an_output_field_can_take_is_in_tools_md() -> None:
    """Each closed set of values a tool's output may hold (a gap's kind, an item's role, a coverage status, the
    placeholders `unknown` and `missing` …) is named in docs/tools.md, quoted, so an agent can look any of them up."""
    from typing import Literal, get_args, get_origin

    from pydantic import BaseModel

    def values(annotation: Any) -> set[str]:
        if get_origin(annotation) is Literal:
            return {v for v in get_args(annotation) if isinstance(v, str)}
        return {v for arg in get_args(annotation) for v in values(arg)}

    def models(annotation: Any) -> list[type[BaseModel]]:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return [annotation]
        return [m for arg in get_args(annotation) for m in models(arg)]

    text = (DOCS / "tools.md").read_text(encoding="utf-8")
    seen: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [spec.output_model for spec in TOOLS]
    undocumented = []
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            todo += models(field.annotation)
            missing = [v for v in sorted(values(field.annotation)) if f"`{v}`" not in text and f'"{v}"' not in text]
            undocumented += [f"{model.__name__}.{name}: {v}" for v in missing]
    assert len(seen) > 20, seen
    assert not undocumented, "\n".join(undocumented)


@pytest.mark.anyio
async def test_the_error_example_in_tools_md_is_what_the_server_sends(tmp_path: Path) -> None:
    """The Errors section shows one error result's text item (a client granted Atlas and Beacon, not Global, asking
    for the inactive project `legacy`): its first line exactly, its JSON payload as trimmed (see elision_mismatches)."""
    import orjson
    from mcp.types import TextContent

    from server.contracts.common import Grant

    text = (DOCS / "tools.md").read_text(encoding="utf-8").split("The one text item reads")[1]
    shown = re.search(r"```text\n(.*?)\n(.*?)\n```", text, re.DOTALL)
    assert shown is not None
    first, payload = shown.groups()
    grant = Grant(default_project="atlas", projects=["atlas", "beacon"], allow_global=False)
    legacy = {"kind": "projects", "projectIds": ["legacy"]}
    async with client_for(demo_db(tmp_path), grant) as client:
        result = await client.call_tool("story_graph_search", {"query": "cache", "scope": legacy})
    item = result.content[0]
    assert result.is_error and isinstance(item, TextContent)
    real_first, real_payload = item.text.rsplit("\n", 1)
    assert first == real_first
    problems = elision_mismatches(orjson.loads(payload), orjson.loads(real_payload))
    assert not problems, "\n".join(problems)
