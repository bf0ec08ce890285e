"""The JSON-RPC error for a message that is not one valid JSON-RPC message: one answer on every transport.

JSON that is not one JSON-RPC request, notification or response (`[]`, `{}`, a batch, a request whose params are
not an object) gets `-32600 Invalid Request`, with the request's id when one can be read from it and null otherwise.
The stdio server answers such a line with it (server/stdio.py), and the HTTP server puts it in place of the SDK's
answer to the same body (server/http_requests.py), which is `-32602` with pydantic's whole validation report (1-2 KB).
"""

from __future__ import annotations

from typing import Any

from mcp.types import INVALID_REQUEST, ErrorData, JSONRPCError
from pydantic import ValidationError


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
