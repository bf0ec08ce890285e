"""Opaque, signed cursors: they bind the tool, the normalised request, the scope, the revision of what the
tool reads and the position, so a tampered, foreign or mismatched cursor is refused and a stale one is recognised.

A cursor is at most CURSOR_MAX_CHARS, the longest the tools take back. It carries its scope, so a caller may follow
it without repeating the scope; a scope of many long project ids (100 UUIDs are 3.9 KB) made it longer, and the
server refused its own cursor. Such a body is compressed, and when that is not enough the cursor carries the scope's
digest instead, and is followed with the same scope sent beside it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import zlib
from dataclasses import dataclass
from typing import Any

import orjson

from server.contracts.common import CURSOR_MAX_CHARS
from server.contracts.errors import invalid_cursor

_VERSION = 1
_COMPRESSED = b"z"
"""Leads a compressed body (a plain one is a JSON object, so starts with `{`)."""
_MAX_BODY = 1 << 20
"""The most a compressed body may expand to (a signed one never comes near)."""


@dataclass(frozen=True)
class DecodedCursor:
    scope_key: str | None
    """The scope the first page read; None when the cursor carries only its digest (too long to carry)."""
    scope_digest: str
    revision: str
    """What the first page was read at, as its tool binds it: the scope's data revision (search), with its memory
    revision (get_context's `current` mode), or the state of the reference and source read (read_source)."""
    position: dict[str, Any]


class CursorCodec:
    """Signs with HMAC-SHA256. Processes that share the secret accept each other's cursors."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret else secrets.token_bytes(32)

    def encode(self, *, tool: str, request: str, scope_key: str, revision: str, position: dict[str, Any]) -> str:
        payload = {"v": _VERSION, "t": tool, "q": request, "s": scope_key, "r": revision, "p": position}
        token = self._token(payload)
        if len(token) > CURSOR_MAX_CHARS:
            token = self._token(payload | {"s": None, "d": scope_digest(scope_key)})
        if len(token) > CURSOR_MAX_CHARS:
            # Ids are at most 256 code points, and a position holds a few: not reached by any stored graph.
            raise ValueError(f"a {tool} cursor of {len(token)} characters, over {CURSOR_MAX_CHARS}")
        return token

    def _token(self, payload: dict[str, Any]) -> str:
        body = orjson.dumps(payload)
        token = self._signed(body)
        if len(token) > CURSOR_MAX_CHARS:  # only then: a short body gains nothing and would cost every page
            token = min(token, self._signed(_COMPRESSED + zlib.compress(body, 9)), key=len)
        return token

    def _signed(self, body: bytes) -> str:
        return f"{_b64(body)}.{_b64(self._mac(body))}"

    def decode(self, token: str | None, *, tool: str, request: str) -> DecodedCursor | None:
        """The content of a cursor issued for this tool and request; None when there is no cursor."""
        if token is None:
            return None
        body_text, dot, mac_text = token.partition(".")
        try:
            body = _unb64(body_text)
            mac = _unb64(mac_text)
        except ValueError:
            raise invalid_cursor("the cursor is not one this server issued.") from None
        if not dot or not hmac.compare_digest(mac, self._mac(body)):
            # A restart is the common innocent cause: without a shared secret each process signs with a new one.
            raise invalid_cursor(
                "the cursor is not one this server issued (signature mismatch): it was altered or cut, comes from "
                "another server, or from before this server restarted without a fixed cursor secret."
            )
        if body.startswith(_COMPRESSED):
            body = zlib.decompressobj().decompress(body[1:], _MAX_BODY)
        payload = orjson.loads(body)
        if payload.get("v") != _VERSION or payload.get("t") != tool:
            raise invalid_cursor("the cursor belongs to another tool.")
        if payload.get("q") != request:
            differing = _differing(str(payload.get("q")), request)
            if differing:
                names = " and ".join(differing)
                raise invalid_cursor(
                    f"the cursor was issued for a request with another {names}; repeat the original {names} with it.",
                    fields=differing,
                )
            if _bound_names(str(payload.get("q"))) != _bound_names(request):
                # Only a server of another version binds other names (search binds its rank rule, RANK_RULE).
                raise invalid_cursor(
                    "the cursor was issued by another version of this server, which pages differently; omit cursor to "
                    "start again."
                )
            raise invalid_cursor("the cursor was issued for a different request; repeat the original filters with it.")
        carried = payload["s"]
        return DecodedCursor(
            scope_key=carried,
            scope_digest=scope_digest(carried) if carried is not None else str(payload["d"]),
            revision=str(payload["r"]),
            position=dict(payload["p"]),
        )

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._secret, body, hashlib.sha256).digest()[:16]


def scope_digest(scope_key: str) -> str:
    """What a cursor too long to carry its scope carries instead: enough to tell another scope apart."""
    return hashlib.sha256(scope_key.encode()).hexdigest()[:32]


def request_digest(tool: str, normalised: dict[str, Any]) -> str:
    """A short digest of everything the pages of one query must share (never the cursor or the scope), followed by
    a shorter digest of each argument, so a mismatch can name the argument that differs (an agent that retyped
    the query in another case, or dropped a filter, was told only 'a different request')."""
    whole = hashlib.sha256(orjson.dumps([tool, normalised], option=orjson.OPT_SORT_KEYS)).hexdigest()[:24]
    parts = ",".join(f"{name}={_digest([tool, name, normalised[name]])}" for name in sorted(normalised))
    return f"{whole};{parts}"


def _digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()[:6]


def _differing(issued: str, request: str) -> list[str]:
    """The arguments whose digests differ between the request a cursor was issued for and this one (in the
    request's order); empty when the cursor carries no per-argument digests."""
    before, now = _parts(issued), _parts(request)
    if not before or set(before) != set(now):
        return []
    return [name for name in now if before[name] != now[name]]


def _parts(text: str) -> dict[str, str]:
    _, _, listed = text.partition(";")
    return dict(part.partition("=")[::2] for part in listed.split(",") if "=" in part)


def _bound_names(text: str) -> set[str] | None:
    """The names a request digest binds (None: a digest without per-argument parts)."""
    parts = _parts(text)
    return set(parts) if parts else None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not text or not text.isascii():
        raise ValueError("empty")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(str(exc)) from exc
