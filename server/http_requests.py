"""One HTTP request to `/mcp` before and after the SDK sees it: the bearer-token gate (the only place a token is
checked), answers rewritten so that every refusal is a JSON-RPC error saying what to fix, the call stopped when
its client disconnects, and the access line. server/http.py assembles the app around these."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Final

import anyio
import orjson
import pydantic_core
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, ErrorData, JSONRPCError, jsonrpc_message_adapter
from pydantic import ValidationError
from starlette.authentication import AuthCredentials
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.jsonrpc_errors import MAX_MESSAGE_BYTES, invalid_message
from server.policy import PolicyTokenVerifier, hash_token

access_log = logging.getLogger("story_graph_mcp.access")

MCP_PATH: Final = "/mcp"
MCP_PATHS: Final = (MCP_PATH, MCP_PATH + "/")
"""`/mcp/` is served as `/mcp` (after the token check, like it): Starlette would answer it with a 307 redirect to
`/mcp` before any check, which told a client without a token that the endpoint exists; a client that does not
follow a redirected POST failed, and one that does paid a second round trip per request."""

NO_TOKEN: Final = (
    "no bearer token: send the token this server's operator issued you as the header "
    "'Authorization: Bearer <token>' (tokens are issued out of band; there is no OAuth authorization server)"
)
UNKNOWN_TOKEN: Final = (
    "this bearer token is not accepted (unknown or revoked): ask this server's operator for a valid token "
    "(tokens are issued out of band; there is no OAuth authorization server)"
)
"""What a 401 says, in its `WWW-Authenticate` error_description and its body: the fix, since a client that looks
for OAuth finds none (RFC 6750 error_description: ASCII without quotes or backslashes)."""


class McpGate:
    """Who may use `/mcp` (and `/mcp/`, the same endpoint), for every method: without a token listed in the policy,
    401 saying how to get in; with one, any method but POST is 405, since the server is stateless and answers with
    JSON (there is no event stream to GET and no session to DELETE; a GET would otherwise open a stream that never
    closes).

    This is the one place a bearer token is checked: the SDK's own bearer middleware is not installed (see
    `build_http_app` in server/http.py). The verified token goes into the ASGI scope as the SDK's
    `AuthenticatedUser`, which the SDK's `AuthContextMiddleware` (inside this gate) hands to the tools as
    `get_access_token()`.

    The 401 names no protected-resource metadata (RFC 9728) and none is served: that document exists to point
    clients at an OAuth authorization server, and the MCP spec requires it to name at least one, which this
    server does not have."""

    def __init__(self, app: ASGIApp, verifier: PolicyTokenVerifier) -> None:
        self.app = app
        self.verifier = verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # Before the path is rewritten below: the access line reads the reason from this scope.
            send = _json_refusals(scope, send)
        if scope["type"] == "http" and scope["path"] in MCP_PATHS:
            token = _bearer_token(scope)
            verified = await self.verifier.verify_token(token) if token is not None else None
            if verified is None:
                # For the access line: which refused token, so that after a rotation the operator can see who
                # still sends the old one (its hash's first hex digits, as `policy hash-token` prints them).
                scope[REFUSED_TOKEN] = "none" if token is None else f"sha256:{hash_token(token)[:TOKEN_HASH_SHOWN]}"
                await _unauthorized(NO_TOKEN if token is None else UNKNOWN_TOKEN)(scope, receive, send)
                return
            # Set on the scope the access line reads too (it logs the client id).
            scope["user"] = AuthenticatedUser(verified)
            scope["auth"] = AuthCredentials(verified.scopes)
            if scope["method"] != "POST":
                error = JSONRPCError(
                    jsonrpc="2.0",
                    id=None,
                    error=ErrorData(
                        code=INVALID_REQUEST,
                        message="Method Not Allowed: this server is stateless and answers POST with JSON; "
                        "there is no event stream or session",
                    ),
                )
                scope[REFUSAL] = "Method Not Allowed"
                response = Response(
                    error.model_dump_json(by_alias=True, exclude_unset=True),
                    status_code=405,
                    headers={"Allow": "POST"},
                    media_type="application/json",
                )
                await response(scope, receive, send)
                return
            if scope["path"] != MCP_PATH:
                # The app routes `/mcp` only; the access line keeps the path the client sent.
                scope = {**scope, "path": MCP_PATH, "raw_path": MCP_PATH.encode()}
            receive, send = _invalid_message_answers(scope, receive, send)
        await self.app(scope, receive, send)


def _invalid_message_answers(scope: Scope, receive: Receive, send: Send) -> tuple[Receive, Send]:
    """A POST body that is JSON but not one JSON-RPC message (`[]`, `{}`, a batch, params that are not an object)
    answered as stdio answers that line (server/jsonrpc_errors.py: `-32600`, the request's id when readable), in place
    of the SDK's `-32602` carrying pydantic's whole validation report; status 400 as before. The body is kept as it
    passes to the SDK (at most `MAX_MESSAGE_BYTES`, 4 MiB) and read again only for that answer."""
    body = bytearray()

    async def receiving() -> Message:
        message = await receive()
        if message["type"] == "http.request":
            body.extend(message.get("body", b""))
        return message

    def answer(start: Message, said: bytes) -> bytes | None:
        status = int(start["status"])
        replaced = _as_stdio_answers(bytes(body), said) if status == HTTPStatus.BAD_REQUEST else None
        # Every refusal's access line says why, as the 401's and the SDK's plain-text ones do (_json_refusals, which
        # sees the answer after this, names those): a body that is not JSON (deeply nested, not UTF-8, empty) is
        # `Parse error`, the SDK's JSON-RPC errors are named by their message's head.
        scope[REFUSAL] = "Invalid Request" if replaced is not None else _error_head(said) or HTTPStatus(status).phrase
        return replaced

    return receiving, _rewriting(send, lambda start: 400 <= start["status"] < 500, answer)


REASON_SHOWN: Final = 80
"""Characters of a JSON-RPC error message's head an access line shows (`Parse error`, `Unsupported protocol
version`): the cause, not the detail."""


def _error_head(answer: bytes) -> str | None:
    """The message of the JSON-RPC error in `answer` up to its first colon (`Parse error: recursion limit exceeded at
    line 1 column 202` is `Parse error`), or None when `answer` is no JSON-RPC error."""
    try:
        message = orjson.loads(answer)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(message, str):
        return None
    head = message.split(":", 1)[0].strip()
    return (head if len(head) <= REASON_SHOWN else head[: REASON_SHOWN - 3] + "...") or None


def _rewriting(send: Send, holds: Callable[[Message], bool], rewrite: Callable[[Message, bytes], bytes | None]) -> Send:
    """`send`, except that a response whose start `holds` accepts is held until its whole body is in, and then sent
    with `rewrite(start, body)` as its JSON body (same status and other headers), or as it was when that is None."""
    held: Message | None = None
    body = b""

    async def sending(message: Message) -> None:
        nonlocal held, body
        if message["type"] == "http.response.start" and holds(message):
            held = message
            return
        if held is None or message["type"] != "http.response.body":
            await send(message)
            return
        body += message.get("body", b"")
        if message.get("more_body", False):
            return
        replaced = rewrite(held, body)
        if replaced is None:
            await send(held)
            await send({"type": "http.response.body", "body": body})
            return
        kept = [(k, v) for k, v in held.get("headers", []) if k not in (b"content-type", b"content-length")]
        kept += [(b"content-type", b"application/json"), (b"content-length", str(len(replaced)).encode())]
        await send({**held, "headers": kept})
        await send({"type": "http.response.body", "body": replaced})

    return sending


def _as_stdio_answers(body: bytes, answer: bytes) -> bytes | None:
    """The invalid-message error for `body` when `answer` is the SDK's validation error for it; None otherwise."""
    try:
        said = orjson.loads(answer)
        if said["error"]["code"] != INVALID_PARAMS or not said["error"]["message"].startswith("Validation error:"):
            return None
        jsonrpc_message_adapter.validate_python(pydantic_core.from_json(body), by_name=False)
    except ValidationError as exc:
        return invalid_message(exc).model_dump_json(by_alias=True, exclude_unset=True).encode()
    except (ValueError, KeyError, TypeError):
        return None
    return None  # the body is a valid message after all: the SDK's answer stands


REFUSAL_FIXES: Final = {
    404: f"this server's MCP endpoint is {MCP_PATH} (Streamable HTTP: POST JSON-RPC there; there is no SSE endpoint);"
    " GET /healthz is its health check",
    400: "send the JSON-RPC message with the header 'Content-Type: application/json'",
    403: "this Origin is not allowed; the server's operator allows one with --allowed-origin (or --public-url)",
    406: "send the header 'Accept: application/json, text/event-stream'",
    413: f"this server accepts at most {MAX_MESSAGE_BYTES // 2**20} MiB per request",
    421: "this Host is not a name this server answers for; the server's operator adds one with --allowed-host "
    "(or --public-url), and a proxy in front must pass the client's Host header",
}
"""The refusals the SDK answers a request to /mcp with in plain text (`Invalid Host header`), an empty body or its own
JSON-RPC error without a fix (406),
and Starlette a path it does not route (a client given the server's root or an old `/sse` URL), by status, and what
to change."""


def _json_refusals(scope: Scope, send: Send) -> Send:
    """The SDK's plain-text refusals of an authenticated /mcp request, and Starlette's 404, as JSON-RPC errors that
    also say what to fix, as the 401's and 405's are (same status and other headers): a client reads the error a
    non-2xx answer carries only when it is JSON-RPC (the Python SDK otherwise shows `Server returned an error
    response`, whatever the cause). The text goes into `scope` for the access line (the SDK logs only a refused
    Host or Origin)."""

    def holds(start: Message) -> bool:
        # A 406 is held even as JSON: without MCP-Protocol-Version the SDK answers it with its own JSON-RPC error,
        # which names no fix (and the access line would show no reason).
        return start["status"] in REFUSAL_FIXES and (start["status"] == 406 or not _is_json(start))

    def refusal(start: Message, text: bytes) -> bytes:
        status = int(start["status"])
        said = (text.decode("utf-8", "replace").strip() if not _is_json(start) else "") or HTTPStatus(status).phrase
        scope[REFUSAL] = said
        error = JSONRPCError(
            jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=f"{said}: {REFUSAL_FIXES[status]}")
        )
        return error.model_dump_json(by_alias=True, exclude_unset=True).encode()

    return _rewriting(send, holds, refusal)


def _is_json(start: Message) -> bool:
    content_type: bytes = dict(start.get("headers", [])).get(b"content-type", b"")
    return content_type.startswith(b"application/json")


def _unauthorized(description: str) -> Response:
    """The fix in the header (RFC 6750) and in a JSON-RPC error body, as the 405's: an MCP client that reads the
    error a non-2xx answer carries (the Python SDK) shows it; any other body it reports as a bare failure."""
    error = JSONRPCError(
        jsonrpc="2.0",
        id=None,
        error=ErrorData(code=INVALID_REQUEST, message=description, data={"error": "invalid_token"}),
    )
    return Response(
        error.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=401,
        headers={"WWW-Authenticate": f'Bearer error="invalid_token", error_description="{description}"'},
        media_type="application/json",
    )


def _bearer_token(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
    return None


class StopOnDisconnect:
    """A client that disconnects before its answer is sent stops its call: the request is cancelled, so the SDK
    ends the call's handler and its SQL with it, instead of finishing work nobody will read while other clients
    wait behind it. (The SDK's stateless JSON mode only notices a gone client when it writes the answer.)

    The app reads the request body through this wrapper; once the body is complete, a watcher waits for the
    connection's `http.disconnect` and cancels the request; the app's own later `receive()` gets it too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_read = anyio.Event()
        disconnected = anyio.Event()
        answered = False

        async def receiving() -> Message:
            if body_read.is_set():
                await disconnected.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected.set()
            elif not message.get("more_body", False):
                body_read.set()
            return message

        async def sending(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            await send(message)

        async def watch(cancel: anyio.CancelScope) -> None:
            await body_read.wait()
            message = await receive()  # after the body, uvicorn answers this when the connection is gone
            if message["type"] == "http.disconnect":
                disconnected.set()
                if not answered:
                    scope[CLIENT_GONE] = True
                    cancel.cancel()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(watch, tasks.cancel_scope)
            try:
                await self.app(scope, receiving, sending)
            finally:
                tasks.cancel_scope.cancel()


CLIENT_GONE: Final = "story_graph.client_gone"
"""Set in the ASGI scope when the client disconnected before its answer: the access line says 499."""
REFUSED_TOKEN: Final = "story_graph.refused_token"
REFUSAL: Final = "story_graph.refusal"
"""Set in the ASGI scope when the SDK refused an authenticated /mcp request (`Invalid Host header`, `Not
Acceptable`, ...): the access line ends with it."""
TOKEN_HASH_SHOWN: Final = 8
"""Hex digits of a refused token's sha256 an access line shows: enough to match it with an entry removed from the
policy file's `token_sha256`, few enough to tell a reader of the log little about what was sent."""


class AccessLog:
    """One line per HTTP request: peer, client id (from the verified token, never the token), method, path,
    status and duration."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            user = scope.get("user")
            client = getattr(user, "username", None) if getattr(user, "is_authenticated", False) else None
            peer = scope.get("client")
            refused = scope.get(REFUSED_TOKEN)
            reason = scope.get(REFUSAL)
            access_log.info(
                "%s %s %s %s %s %.1fms%s%s",
                peer[0] if peer else "-",
                client or "-",
                _printable(scope["method"]),
                _printable(scope["path"]),
                499 if scope.get(CLIENT_GONE) else status or "-",
                (time.perf_counter() - started) * 1000,
                f" token={refused}" if refused else "",
                f' reason="{_quotable(reason)}"' if reason else "",
            )


def _printable(text: str) -> str:
    """`text` with every character but printable ASCII escaped (`\\x0a`): the path is percent-decoded and comes
    from anyone, token or not, so `GET /x%0A<a forged access line>` wrote a second line of its choosing into the
    log, and `%1B` terminal escapes into the operator's terminal. A backslash is escaped too, so an escape in the
    log was always written by this function."""
    return "".join(ch if "!" <= ch <= "~" and ch != "\\" else _escaped(ord(ch)) for ch in text)


def _quotable(text: str) -> str:
    """A reason as it goes between the access line's quotes: as `_printable`, but spaces kept and a quote escaped (a
    JSON-RPC error's message may quote what the client sent)."""
    return "".join(ch if " " <= ch <= "~" and ch not in '\\"' else _escaped(ord(ch)) for ch in text)


def _escaped(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
