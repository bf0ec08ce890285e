"""The docs are a contract: every tool and every error code has its place in docs/tools.md."""

from __future__ import annotations

from pathlib import Path

from server.contracts.errors import ERROR_CODES
from server.tools import TOOLS

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_registered_tool_has_a_reference_section() -> None:
    text = (DOCS / "tools.md").read_text(encoding="utf-8")
    for spec in TOOLS:
        assert f"## `{spec.name}`" in text, spec.name


def test_every_error_code_is_documented() -> None:
    text = (DOCS / "tools.md").read_text(encoding="utf-8")
    for code in ERROR_CODES:
        assert f"| `{code}` |" in text, code
