"""The JSON-RPC error for a message that is not one valid JSON-RPC message: one answer on every transport.

JSON that is not one JSON-RPC request, notification or response (`[]`, `{}`, a batch, a request whose params are
not an object) gets `-32600 Invalid Request`, with the request's id when one can be read from it and null otherwise.
The stdio server answers such a line with it (server/stdio.py), and the HTTP server puts it in place of the SDK's
answer to the same body (server/http_requests.py), which is `-32602` with pydantic's whole validation report (1-2 KB).
Both transports also take one message of at most `MAX_MESSAGE_BYTES`.
"""

from __future__ import annotations

from typing import Any, Final

from mcp.types import INVALID_REQUEST, ErrorData, JSONRPCError
from pydantic import ValidationError

MAX_MESSAGE_BYTES: Final = 4 * 2**20
"""The most one JSON-RPC message may take, on every transport: an HTTP request body (beyond it `413`) and a stdio line
(beyond it `-32600`, the line dropped as it arrives; server/stdio.py). It is the MCP SDK's default HTTP body limit
(4 MiB), now stated here and passed to the SDK: the largest request the tools take is about 360 KB (a 4,000-character
query, a 4,096-character cursor and 100 project ids of 256 characters each, every character a JSON `\\u` escape of a
surrogate pair), so this leaves ten times that, and it bounds what a process holds for one client's message."""


def invalid_message(exc: ValidationError) -> JSONRPCError:
    """The error for JSON that failed validation as one JSON-RPC message."""
    errors = exc.errors(include_url=False)
    message = "Invalid Request: expected one JSON-RPC 2.0 request or notification object"
    if any(isinstance(err.get("input"), list) for err in errors):
        message += "; batches are not supported"
    return error(_request_id(errors), INVALID_REQUEST, message)


def error(request_id: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _request_id(errors: list[Any]) -> str | int | None:
    """The id of an invalid request, when the message was a JSON object holding a usable one."""
    for err in errors:
        value = err.get("input")
        if isinstance(value, dict):
            request_id = value.get("id")
            if isinstance(request_id, str | int) and not isinstance(request_id, bool):
                return request_id
    return None
