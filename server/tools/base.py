"""What every tool is made of: its spec (name, description, contracts, handler) and its per-call inputs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from server.contracts.base import Contract
from server.contracts.common import Grant
from server.reader.cursor import CursorCodec
from server.reader.db import Database
from server.reader.fold import Folder
from server.reader.memo import Memo


@dataclass(frozen=True)
class Call:
    """What a tool needs for one call; the grant is frozen for the whole request."""

    db: Database
    grant: Grant
    cursors: CursorCodec
    folder: Folder
    memo: Memo
    """Values derived from stored data, keyed by the data revision they were read at."""
    read_at: str


Handler = Callable[[Call, Any], Awaitable[BaseModel]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_model: type[Contract]
    output_model: type[BaseModel]
    handler: Handler
    size_arguments: tuple[str, ...] = ("page_size",)
    """The arguments that shrink a page, the one most likely to help first: response_too_large names them."""
