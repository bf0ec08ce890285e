"""story-graph-mcp: a read-only MCP server over a temporal story graph in SQLite."""


def package_version() -> str:
    """The installed distribution's version (a source checkout that is not installed says so)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("story-graph-mcp")
    except PackageNotFoundError:
        return "0.0.0+source"
