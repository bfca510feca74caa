"""Training progress: a bar through tqdm when it is installed and the stream is a terminal, else
one plain line every few steps (no carriage returns, no ANSI codes: logs and CI stay readable).
NO_COLOR (any value) keeps tqdm to plain ASCII. The ETA and the rate (tokens, images, ... per
second: `unit`) leave out the first step, which on a cold kernel cache is mostly kernel
compilation."""
from __future__ import annotations

import os
import sys
import time
from typing import IO, Any, Optional


def format_seconds(seconds: float) -> str:
    """"3m05s" for 185 seconds."""
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _is_terminal(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", None)) and stream.isatty()


class ProgressBar:
    """Progress of `total` steps: update(step, loss, count, val) after each step, `count` the
    items (`unit`: "tok", "img") done so far; message() prints a line without breaking the bar;
    close() ends it. `start` is the start time (time.perf_counter())."""

    def __init__(self, total: int, stream: Optional[IO[str]] = None, width: int = 24,
                 use_tqdm: Optional[bool] = None, unit: str = "tok") -> None:
        self.total, self.width, self.unit = max(int(total), 1), width, unit
        self.stream = stream if stream is not None else sys.stderr
        self.tty = _is_terminal(self.stream)
        self.no_color = "NO_COLOR" in os.environ
        self.every = max(1, self.total // 25)
        self.start = time.perf_counter()
        self.warm: Optional[tuple] = None  # (step, time, count) after the first, compiling step
        self.last_line = ""
        self.tqdm: Any = None
        if use_tqdm is None:
            use_tqdm = self.tty
        if use_tqdm:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.tqdm = tqdm(total=self.total, file=self.stream, unit="step",
                                 ascii=self.no_color or None, dynamic_ncols=True,
                                 smoothing=0.05, leave=True)

    def eta(self, step: int, now: Optional[float] = None) -> Optional[float]:
        """Seconds left at `step` (at time `now`), from the steps after the first; None until
        two steps are done."""
        if self.warm is None or step <= self.warm[0]:
            return None
        done_since = step - self.warm[0]
        now = time.perf_counter() if now is None else now
        rate = (now - self.warm[1]) / done_since
        return rate * (self.total - step)

    def update(self, step: int, loss: float, tokens: int, val: Optional[float] = None,
               force: bool = False) -> None:
        """Shows step `step` of total with its loss, validation loss and the rate of `tokens`
        (the count of `unit` done so far) since the first step; off a terminal a line is printed
        every total/25 steps and when `force` is set."""
        now = time.perf_counter()
        if self.warm is None and step >= 1:
            self.warm = (step, now, tokens)
        eta = self.eta(step, now)
        eta_text = format_seconds(eta) if eta is not None else "--"
        if eta is None:
            rate_text = "--"
        else:
            rate_text = f"{(tokens - self.warm[2]) / max(now - self.warm[1], 1e-9):.0f}"
        details = (f"loss {loss:6.3f}" + (f" val {val:6.3f}" if val is not None else "")
                   + f" | {rate_text:>7} {self.unit}/s")
        if self.tqdm is not None:
            self.tqdm.n = step
            self.tqdm.set_postfix_str(details, refresh=False)
            self.tqdm.refresh()
            return
        filled = int(self.width * step / self.total)
        bar = "#" * filled + "." * (self.width - filled)
        line = f"step {step:>5}/{self.total} [{bar}] {details} | ETA {eta_text}"
        self.last_line = line
        if self.tty:
            self.stream.write("\r" + line)
            self.stream.flush()
        elif force or step % self.every == 0 or step == self.total:
            self.stream.write(line + "\n")
            self.stream.flush()

    def message(self, text: str) -> None:
        """Prints a line of text without breaking the bar."""
        if self.tqdm is not None:
            self.tqdm.write(text, file=self.stream)
            return
        if self.tty:
            self.stream.write("\r" + " " * len(self.last_line) + "\r")
        self.stream.write(text + "\n")
        if self.tty and self.last_line:
            self.stream.write(self.last_line)
        self.stream.flush()

    def close(self) -> None:
        """Ends the bar (a final newline on a terminal)."""
        if self.tqdm is not None:
            self.tqdm.close()
            self.tqdm = None
        elif self.tty:
            self.stream.write("\n")
            self.stream.flush()


__all__ = ["ProgressBar", "format_seconds"]
