"""What-ifs on a public lab (issue 18): exports are deleted like every other export, one
visitor's what-if memory is bounded in bytes, not only in edits, and malformed arguments to the
what-if and Generate handlers get one line.

A real `python app.py` in public mode (LAB_PUBLIC=1) with its own TMPDIR; visitors are anonymous
gradio_client sessions.
"""
from __future__ import annotations

import yaml

import pytest

from lab.whatif.validate import LIMITS_PATH
from tests.helpers_app import app_process, lab_env
from tests.paths import EXCERPT
from tests.public.test_public_mode import visitor
from tests.helpers_store import make_results_dir

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
KEY = "task-000/2"
N_EXPORTS = 20


def run_logs(job) -> list[str]:
    """The gr.Info/Warning lines a finished job showed."""
    job.result(timeout=120)
    lines = []
    while not job.communicator.updates.empty():
        log = getattr(job.communicator.updates.get_nowait(), "log", None)
        if log:
            lines.append(log[0])
    return lines


def lab_folders(tmp) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith(("lab-whatif", "lab-exports")))


def test_exports_go_and_memory_is_bounded_in_bytes(tmp_path):
    results = make_results_dir(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    caps = yaml.safe_load(LIMITS_PATH.read_text())
    cap = 4 * caps["max_added_chars"] + 8_000  # room for a few large edits, far from max_session_whatifs
    caps["max_session_bytes"] = cap
    (tmp_path / "limits.yaml").write_text(yaml.safe_dump(caps))
    env = lab_env(LAB_PUBLIC="1", LAB_RESULTS=str(results), TMPDIR=str(tmp),
                  LAB_WHATIF_LIMITS=str(tmp_path / "limits.yaml"))
    args = ["--results", str(results), "--replay", str(EXCERPT), "--engine", "reference"]
    with app_process(args, tmp_path / "app.log", env) as (url, _):
        guest = visitor(url)
        warnings: list[str] = []
        kept = 0
        for i in range(12):
            lines = run_logs(guest.submit(KEY, "screen", f"{i}" + "x" * (caps["max_added_chars"] - 10), "", False,
                                          api_name="/whatif_run"))
            if any("cap of" in line for line in lines):
                warnings += lines
            else:
                kept += 1
        assert 1 <= kept < 12, (kept, warnings)  # refused by bytes long before max_session_whatifs
        assert any(f"cap of {cap} bytes" in w and "\n" not in w for w in warnings), warnings
        # another visitor's session is its own
        other = run_logs(visitor(url).submit(KEY, "screen", "short edit", "", False, api_name="/whatif_run"))
        assert not any("cap of" in line for line in other), other
        from gradio_client.exceptions import AppError

        for args, api in ((([KEY], "screen", "x", "", False), "/whatif_run"), (({"a": 1}, "screen", "x", "", False),
                          "/whatif_run"), ((KEY, ["screen"], "x", "", False), "/whatif_run"),
                          (([1], "reference", False), "/whatif_replay")):
            with pytest.raises(AppError) as err:
                guest.predict(*args, api_name=api)
            assert "must be text" in str(err.value) and "\n" not in str(err.value).strip()
        for bad in ([KEY], {"a": 1}):  # Compare's Generate takes the same step argument as /show_step
            with pytest.raises(AppError) as err:
                guest.predict(bad, False, None, api_name="/generate")
            assert "step key" in str(err.value) and "\n" not in str(err.value).strip()
        paths = [guest.predict(api_name="/whatif_export") for _ in range(N_EXPORTS)]
        assert all(paths)
        assert len(lab_folders(tmp)) <= 1  # one process-wide export area, not one folder per export
    log = (tmp_path / "app.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    assert lab_folders(tmp) == []  # every export folder went with the process
