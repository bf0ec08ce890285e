"""A non-editable install in a fresh venv runs `serve --demo` and answers initialize/tools/list over stdio.

Builds the wheel (`pip wheel . --no-deps`), makes a new venv (no system site-packages), installs the wheel
there (dependencies come from the package index or pip's cache), then starts the installed console script
from a directory outside the checkout and talks to it with the SDK client. Needs the package index; about
20 s, mostly pip resolving and installing the dependencies.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from http_support import REPO
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.anyio

STEP_TIMEOUT = 600


def run(*argv: str | Path, cwd: Path) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=STEP_TIMEOUT
    )
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def clean_env() -> dict[str, str]:
    """No PYTHONPATH, no active venv: the installed package must stand on its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    run(sys.executable, "-m", "pip", "wheel", REPO, "--no-deps", "-q", "-w", work / "dist", cwd=work)
    (wheel,) = (work / "dist").glob("story_graph_mcp-*.whl")
    venv = work / "venv"
    # A fresh venv; this process's pip installs into it (`--python`), which saves bootstrapping a second pip.
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=work)
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", wheel, cwd=work)
    return venv


def test_the_package_comes_from_the_venv_not_the_checkout(installed: Path) -> None:
    where = run(installed / "bin" / "python", "-c", "import server; print(server.__file__)", cwd=installed)
    assert Path(where.strip()).is_relative_to(installed)
    shipped = run(
        installed / "bin" / "python",
        "-c",
        "from server.store.paths import bundled; print(bundled('migrations').is_dir(), bundled('demo').is_dir())",
        cwd=installed,
    )
    assert shipped.split() == ["True", "True"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_installed_serve_demo_answers_over_stdio(installed: Path, mode: str) -> None:
    params = StdioServerParameters(
        command=str(installed / "bin" / "story-graph-mcp"), args=["serve", "--demo"], cwd=installed, env=clean_env()
    )
    with (installed / f"server-{mode}.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            assert client.server_info is not None and client.server_info.name == "story-graph-mcp"
            assert client.server_info.version == "0.1.0"
            tools = {t.name for t in (await client.list_tools()).tools}
            assert "story_graph_search" in tools
            found = await client.call_tool("story_graph_search", {"query": "session cache"})
            assert not found.is_error and found.structured_content is not None
            assert found.structured_content["resolved_scope"] == {"kind": "projects", "projectIds": ["atlas"]}
