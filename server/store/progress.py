"""Progress of a long `db` command on stderr (never stdout: export may write its data there).

On a terminal: one bar per phase, redrawn in place a few times a second. Otherwise (a log file, a
pipe, CI): a plain line every few seconds with the objects done, the rate and the time elapsed,
and a closing line for a phase that printed any. A phase without a unit counts nothing (one long
database statement): it shows only the time elapsed.
"""

from __future__ import annotations

import sys
import time
from typing import Final, TextIO

BAR_WIDTH: Final = 24
REDRAW_SECONDS: Final = 0.1
DEFAULT_EVERY_SECONDS: Final = 5.0


class Progress:
    """Reports `done` (and, when known, `total` or a fraction) for one phase after another."""

    def __init__(self, label: str, stream: TextIO | None, *, bar: bool = False, every: float = DEFAULT_EVERY_SECONDS):
        self.label = label
        self.stream = stream
        self.bar = bar
        self.every = REDRAW_SECONDS if bar else every
        self.name = ""
        self.unit = ""
        self.total: int | None = None
        self.done = 0
        self.fraction: float | None = None
        self.started = self.shown = time.monotonic()
        self.printed = False

    @classmethod
    def to_stderr(cls, label: str, *, every: float = DEFAULT_EVERY_SECONDS, quiet: bool = False) -> Progress:
        """A bar when stderr is a terminal, plain lines otherwise; nothing when `quiet`."""
        if quiet:
            return cls.silent()
        return cls(label, sys.stderr, bar=sys.stderr.isatty(), every=every)

    @classmethod
    def silent(cls) -> Progress:
        return cls("", None)

    def phase(self, name: str, unit: str, total: int | None = None) -> None:
        """Start a phase; the previous one, if any, is finished first."""
        self.finish()
        self.name, self.unit, self.total = name, unit, total
        self.done, self.fraction, self.printed = 0, None, False
        self.started = self.shown = time.monotonic()

    def expect(self, total: int) -> None:
        """The current phase's total, once it is known."""
        self.total = total

    def tick(self) -> None:
        """Nothing new is done yet, but time goes on: show it (a long statement calls this)."""
        self.update(self.done, self.fraction)

    def update(self, done: int, fraction: float | None = None) -> None:
        """`done` objects so far; `fraction` (0..1) when the total is not a count (e.g. bytes read)."""
        self.done, self.fraction = done, fraction
        if self.stream is None:
            return
        now = time.monotonic()
        if now - self.shown >= self.every:
            self.shown = now
            self._show(now)

    def finish(self) -> None:
        """End the current phase: the bar keeps its last state on its own line; plain mode closes what it began."""
        if self.stream is None or not self.name:
            return
        if self.bar or self.printed:
            self._show(time.monotonic(), closing=True)
        self.name = ""

    def stop(self) -> None:
        """The command failed mid-phase: end a half-drawn bar so the error starts on its own line."""
        if self.stream is not None and self.bar and self.printed and self.name:
            self.stream.write("\n")
            self.stream.flush()
        self.name = ""

    def _show(self, now: float, *, closing: bool = False) -> None:
        assert self.stream is not None
        elapsed = now - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        share = self._share()
        if not self.unit:  # nothing counted: the time is all there is to show
            if self.bar:
                self.stream.write(f"\r{self.label}: {self.name} {_clock(elapsed)}\x1b[K" + ("\n" if closing else ""))
            else:
                state = "done" if closing else "running"
                self.stream.write(f"{self.label}: {self.name}: {state}, {elapsed:.1f} s elapsed\n")
        elif self.bar:
            filled = round(BAR_WIDTH * (share or 0.0))
            percent = "" if share is None else f" {share:4.0%}"
            text = (
                f"\r{self.label}: {self.name} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}]{percent}"
                f" {self.done:,} {self.unit} {rate:,.0f}/s {_clock(elapsed)}\x1b[K"
            )
            self.stream.write(text + ("\n" if closing else ""))
        else:
            of = "" if self.total is None else f" of {self.total:,}"
            percent = "" if share is None else f" ({share:.0%})"
            state = "done" if closing else "so far"
            self.stream.write(
                f"{self.label}: {self.name}: {self.done:,}{of} {self.unit}{percent} {state},"
                f" {rate:,.0f} {self.unit}/s, {elapsed:.1f} s elapsed\n"
            )
        self.stream.flush()
        self.printed = True

    def _share(self) -> float | None:
        if self.total:
            return min(self.done / self.total, 1.0)
        if self.total == 0:
            return 1.0
        return self.fraction


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}:{rest:02d}"
