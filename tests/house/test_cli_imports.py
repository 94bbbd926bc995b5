"""Each light CLI command imports only what it needs: `rescore`, `results`, `data`, `compare` (and `equiv`, where it
exists) never load `openai`, `gradio`, `torch` or `ray` (DESIGN §3), nor the managed servers' machinery
(their exit handlers, with `httpx`): only commands that start servers install those. Checked in a fresh
interpreter."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.synthetic import make_results
from lab.cli import COMMANDS
from tests.paths import EXCERPT, REPO

HEAVY = ("openai", "gradio", "torch", "ray", "httpx")
# runs `lab.cli.main(argv)` and prints its exit status and the top-level packages it loaded
PROBE = """
import json, sys
from lab.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as exc:
    rc = exc.code
print(json.dumps({"rc": rc, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def loaded(*argv: str) -> tuple[int, set[str]]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=REPO, capture_output=True, text=True, timeout=180)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    return report["rc"], set(report["modules"])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-imports")
    result = root / "results" / "run.json"
    result.parent.mkdir()
    result.write_text(json.dumps(make_results(n_runs=1, n_steps=20)[0]))
    (root / "compare").mkdir()  # `compare` needs 30 steps or more for an interval
    for i, run in enumerate(make_results(n_runs=2, n_steps=60)):
        (root / "compare" / f"run{i}.json").write_text(json.dumps(run))
    from lab.cli import main  # the dataset the import reads, made here (no order among the cases)

    assert main(["results", "--db", str(root / "exported.duckdb"), "--results", str(root / "results"), "export", "run",
                 "--out", str(root / "exported")]) == 0
    return root, result


def commands(root, result) -> dict[str, list[str]]:
    db = ["--db", str(root / "lab.duckdb"), "--results", str(root / "results")]
    return {
        "rescore": ["rescore", str(result), "-o", str(root / "rescored.json")],
        "results import": ["results", *db, "import", str(result)],
        "results tables": ["results", *db, "tables"],
        # runs as a dataset: the export (pyarrow, the card's intervals) and its import; only a Hub source or
        # --push-to-hub loads huggingface_hub (and httpx)
        "results export": ["results", *db, "export", "run", "--out", str(root / "dataset")],
        "results import dataset": ["results", "--db", str(root / "other.duckdb"), "--results", str(root / "other"),
                                   "import", str(root / "exported")],
        "data info": ["data", "info", "--replay", str(EXCERPT)],
        "data published list": ["data", "published", "list", "--series"],
        "compare": ["compare", str(root / "compare" / "run0.json"), str(root / "compare" / "run1.json"),
                    "--resamples", "200", "--max-drop", "100"],
        "plan": ["plan", str(root / "compare" / "run0.json"), str(root / "compare" / "run1.json"), "--resamples", "200"],
        # `equiv` is checked once lab/cli.py has it (its own tests give it real arguments)
        **({"equiv --help": ["equiv", "--help"]} if "equiv" in COMMANDS else {}),
    }


@pytest.mark.parametrize("name", ["rescore", "results import", "results tables", "results export",
                                  "results import dataset", "data info", "data published list", "equiv --help",
                                  "compare", "plan"])
def test_light_commands_load_no_heavy_package(files, name):
    argv = commands(*files).get(name)
    if argv is None:
        pytest.skip(f"`python -m lab {name}` does not exist yet")
    rc, modules = loaded(*argv)
    assert rc == 0, f"python -m lab {' '.join(argv)} exited {rc}"
    assert "lab" in modules  # the probe saw the lab's own imports
    assert not modules & set(HEAVY), f"python -m lab {name} loaded {sorted(modules & set(HEAVY))}"


def test_the_probe_sees_a_heavy_import(files):
    """The check is not blind: a command that may start servers (`replay`) loads their machinery (`httpx`, its
    exit handlers) even for the reference engine, but not the OpenAI SDK, which only an engine that talks to a
    server needs (0.8 s of each run of the CLI otherwise)."""
    rc, modules = loaded("replay", "--engine", "reference", "--replay", str(EXCERPT), "--limit", "1",
                         "--out", str(files[0] / "runs"))
    assert rc == 0
    assert "httpx" in modules
    assert not modules & {"openai", "torch", "gradio", "ray"}


def test_only_commands_that_start_servers_install_their_exit_handlers():
    """`replay`, `sweep` and `whatif` start model servers, so they stop them on exit; the others do not
    load that machinery at all."""
    from lab.cli import STARTS_SERVERS

    assert STARTS_SERVERS == {"replay", "sweep", "whatif"}
    assert STARTS_SERVERS <= set(COMMANDS)
