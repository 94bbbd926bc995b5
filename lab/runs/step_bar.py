"""The replay command's bar on stderr: the steps done and the live aggregate, and between finished steps the
tokens generated so far, tokens a second and the estimated time left (lab.runs.meter), redrawn every second."""
from __future__ import annotations

import sys
import threading
from typing import TextIO

from tqdm import tqdm

from lab.runs.meter import ReplayMeter, describe

LIVE_EVERY_S = 1.0  # how often the bar is redrawn while no step finishes
# tqdm's own time left counts finished steps, which a batch of four moves only when all four end: the
# meter's estimate (in the postfix) replaces it
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]"


class StepBar:
    """One engine's bar: `progress` is the replay's ProgressFn, `meter` its ReplayMeter, `draw` the redraw."""

    def __init__(self, name: str, total: int, file: TextIO | None = None) -> None:
        self.meter = ReplayMeter()
        self.bar = tqdm(total=total, desc=name, unit="step", file=file or sys.stderr, bar_format=BAR_FORMAT)
        self._scores = ""
        self._lock = threading.Lock()  # the replay's thread and the redraw's

    def progress(self, done: int, total: int, agg: dict | None) -> None:
        """A step finished (or the run began): the count, and the aggregate when it comes."""
        with self._lock:
            self.bar.n = done
            if agg:
                self._scores = f"f1={agg['avg_command_f1']:.4f}, json={agg['valid_json_pct']:.1f}%"
        self.draw()

    def draw(self) -> None:
        """Redraw with the meter's figures now."""
        live = describe(self.meter.figures(), compact=True)
        with self._lock:
            self.bar.set_postfix_str(", ".join(t for t in (self._scores, live) if t), refresh=True)

    def close(self) -> None:
        with self._lock:
            self.bar.close()
