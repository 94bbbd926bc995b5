"""A benchmark's figures as data: one JSON file per benchmark in bench/results/ (docs/benchmarks.md is built from them).

    record = Record("bench_rescore", packages=("duckdb",))   # the machine's load is read here …
    record.figure("rescore_many, 100 runs x 303 steps", best, "s", note="best of 3")
    record.check("identical numbers on every step", mismatches == 0)
    record.write()                                          # … and here, with the rest of the machine

Each file holds the command as run, the figures, the checks and the machine it ran on (cores, load average
before and after, memory, Python, the key packages' versions). `LAB_BENCH_RESULTS=DIR` (or `--results-dir`
where a benchmark offers it) writes elsewhere, so a trial run leaves the committed figures alone.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# packages whose versions every record names (those a benchmark uses add to them)
BASE_PACKAGES = ("numpy", "duckdb", "pandas")
SCHEMA = 1


def package_versions(names: tuple[str, ...] | list[str]) -> dict[str, str | None]:
    """Installed version of each distribution (None where it is not installed); nothing is imported."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def vllm_version(vllm_exe: str | None = None) -> str | None:
    """vLLM's version in its own environment (the Python beside `$LAB_VLLM`), None where there is none."""
    exe = vllm_exe or os.environ.get("LAB_VLLM")
    if not exe:
        return None
    python = Path(exe).with_name("python")
    if not python.exists():
        return None
    done = subprocess.run([str(python), "-c", "from importlib.metadata import version; print(version('vllm'))"],
                          capture_output=True, text=True, timeout=60)
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def memory_gib() -> float | None:
    """The machine's memory in GiB (Linux: /proc/meminfo)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def machine(packages: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """The machine a benchmark runs on: cores (all, and those this process may use), memory, load, versions."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cores": os.cpu_count(),
        "cores_usable": usable,
        "memory_gib": memory_gib(),
        "processor": platform.processor() or platform.machine(),
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": package_versions(list(dict.fromkeys([*BASE_PACKAGES, *packages]))),
    }


@dataclass
class Record:
    """What one run of a benchmark measured; `write()` puts it in bench/results/NAME.json."""

    name: str
    packages: tuple[str, ...] = ()
    argv: list[str] = field(default_factory=lambda: list(sys.argv[1:]))
    figures: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    extra_versions: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.load_before = load_average()
        self.began = time.perf_counter()

    def figure(self, label: str, value: float | int | None, unit: str = "", note: str = "") -> None:
        """One measured figure (`value` rounded to 4 significant digits when it is a float)."""
        if isinstance(value, float):
            value = float(f"{value:.4g}")
        self.figures.append({"label": label, "value": value, "unit": unit, **({"note": note} if note else {})})

    def check(self, label: str, passed: bool, detail: str = "") -> None:
        """A correctness check the benchmark made beside its timings (identical numbers, …)."""
        self.checks.append({"label": label, "passed": bool(passed), **({"detail": detail} if detail else {})})

    def setting(self, **values: Any) -> None:
        """The sizes the run used (runs, steps, rounds, …), beside the command line."""
        self.settings.update(values)

    def as_dict(self) -> dict[str, Any]:
        box = machine(self.packages)
        box["packages"].update(self.extra_versions)
        box["load_average_before"] = self.load_before
        box["load_average_after"] = load_average()
        return {
            "schema": SCHEMA,
            "benchmark": self.name,
            "command": " ".join(["python", f"bench/{self.name}.py", *self.argv]),
            "settings": self.settings,
            "figures": self.figures,
            "checks": self.checks,
            "wall_s": round(time.perf_counter() - self.began, 1),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": box,
        }

    def write(self, out_dir: str | Path | None = None) -> Path:
        """Write bench/results/NAME.json (or into `out_dir`, or `$LAB_BENCH_RESULTS`) and say where."""
        folder = Path(out_dir or os.environ.get("LAB_BENCH_RESULTS") or RESULTS)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.name}.json"
        path.write_text(json.dumps(self.as_dict(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"figures written to {path}", file=sys.stderr)
        return path
