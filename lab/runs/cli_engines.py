"""The engines a command's `--engine SPEC`s name, created and loaded one at a time: the one loop of
`replay`, `score-reference` and `whatif replay`. A SPEC whose check or load fails is reported in one line
and counted; the command goes on with the next one."""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Iterator, Sequence

from lab.errors import LabError


def warn_preset_fit(spec: str, engine: object) -> None:
    """One warning line when the SPEC's preset is made for another family than its checkpoint's."""
    from lab.engines.preset_fit import fit_warning

    warning = fit_warning(engine)
    if warning:
        print(f"warning: {spec}: {warning}", file=sys.stderr)


class CliEngines:
    """Iterating gives (spec, loaded engine) for each SPEC in turn; the caller closes each engine it gets.
    `check(engine)`, before the load, refuses an engine with a LabError (a run name that is taken says so
    before a model loads for minutes). `failures` counts the SPECs refused or not loaded, and any the caller
    reports with `fail`."""

    def __init__(self, specs: Sequence[str], check: Callable[[Any], None] | None = None) -> None:
        self.specs, self.check = list(specs), check
        self.failures = 0
        self.load_seconds: float | None = None  # how long the engine given last took to load

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        from lab.engines import create_engine

        for spec in self.specs:
            engine = create_engine(spec)
            warn_preset_fit(spec, engine)
            try:
                if self.check is not None:
                    self.check(engine)
                start = time.perf_counter()
                engine.load()
            except LabError as exc:
                self.fail(spec, exc)
                continue
            self.load_seconds = time.perf_counter() - start
            yield spec, engine

    def fail(self, spec: str, why: object) -> None:
        """Report `spec`'s failure in one line and count it."""
        print(f"error: {spec}: {why}", file=sys.stderr)
        self.failures += 1
