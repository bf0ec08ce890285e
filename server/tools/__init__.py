"""The tools this server registers, in listing order (the single registration list)."""

from server.tools import context, search, source
from server.tools.base import ToolSpec

TOOLS: tuple[ToolSpec, ...] = (search.SPEC, context.SPEC, source.SPEC)
