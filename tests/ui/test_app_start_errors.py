"""`python app.py` given what cannot work says so in one line naming the input and what to pass instead:
a port that is not one (from --port or $PORT), a results folder that is a file, a port another process holds,
a host that is not this machine's. No traceback, and nothing already there is touched."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.helpers_app import REPO, lab_env
from tests.helpers_servers import free_port
from tests.paths import EXCERPT

import app


@pytest.mark.parametrize("port", ["99999", "0", "-1", "http", "7860x"])
def test_a_port_that_is_not_one_is_refused_by_the_argument_parser(port, capsys, monkeypatch):
    monkeypatch.delenv("PORT", raising=False)
    with pytest.raises(SystemExit) as stop:
        app.parse_args(["--port", port])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python app.py: error: argument --port: '{port}' (from --port or $PORT) is not a port: give a number 1-65535")
    monkeypatch.setenv("PORT", port)  # a Space's PORT goes through the same check
    with pytest.raises(SystemExit):
        app.parse_args([])
    assert "(from --port or $PORT) is not a port" in capsys.readouterr().err
    monkeypatch.setenv("PORT", "7861")
    assert app.parse_args([]).port == 7861 and app.parse_args(["--port", "8080"]).port == 8080


def run_app(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    """`python app.py ARGS…` to its end (a start that fails), its own results folder unless ARGS name one."""
    own = [] if "--results" in args else ["--results", str(tmp_path / "own-results")]
    return subprocess.run([sys.executable, str(REPO / "app.py"), "--replay", str(EXCERPT), *own, *args], cwd=tmp_path,
                          env=lab_env(), text=True, capture_output=True, timeout=120)


@pytest.mark.slow  # starts the app
def test_a_results_folder_that_is_a_file_is_one_line_and_the_file_is_kept(tmp_path):
    taken = tmp_path / "results"
    taken.write_text("my notes")
    done = run_app(["--results", str(taken), "--port", str(free_port())], tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"error: cannot open the lab's folders: {taken}: File exists (--results DIR: a folder the lab can write)")
    assert taken.read_text() == "my notes"


@pytest.mark.slow  # starts the app twice
def test_a_port_in_use_and_a_host_not_here_are_one_line_each(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = run_app(["--host", "127.0.0.1", "--port", str(port)], tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"error: cannot serve on 127.0.0.1:{port}: Address already in use (--port N, --host ADDRESS)")

    done = run_app(["--host", "no-such-host.invalid", "--port", str(free_port())], tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: cannot serve on no-such-host.invalid:")
    assert done.stderr.splitlines()[-1].endswith("(--port N, --host ADDRESS)")


@pytest.mark.parametrize("host,beyond", [("127.0.0.1", False), ("localhost", False), ("::1", False), ("[::1]", False), ("::ffff:127.0.0.1", False), ("127.1", False),
                                         ("0", True),
                                         ("0.0.0.0", True), ("::", True), ("192.0.2.10", True)])
def test_which_hosts_serve_beyond_this_machine(host, beyond):
    from lab.serve import reaches_beyond_this_machine

    assert reaches_beyond_this_machine(host) is beyond


def test_the_owners_lab_on_every_interface_takes_an_explicit_choice(monkeypatch):
    """A container sets GRADIO_SERVER_NAME=0.0.0.0: without public mode that served the owner's lab (Batch,
    sweeps, any path) to the network (issue 40 item 6). Public mode or LAB_PUBLIC=0 (the owner's choice)
    lets it start; neither is one line naming the host and what to set."""
    from lab.settings import Settings
    from lab.serve import exposure_problem

    for name in ("SPACE_ID", "LAB_PUBLIC"):
        monkeypatch.delenv(name, raising=False)
    assert "set LAB_PUBLIC=1 to serve it in public mode, LAB_PUBLIC=0" in exposure_problem("0.0.0.0", Settings())
    assert exposure_problem("127.0.0.1", Settings()) is None
    monkeypatch.setenv("LAB_PUBLIC", "0")
    assert exposure_problem("0.0.0.0", Settings()) is None  # the owner's explicit choice
    monkeypatch.setenv("LAB_PUBLIC", "1")
    assert exposure_problem("0.0.0.0", Settings()) is None


@pytest.mark.slow  # starts the app
def test_app_py_on_every_interface_without_a_choice_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "app.py"), "--replay", str(EXCERPT), "--results",
                           str(tmp_path / "r"), "--host", "0.0.0.0", "--port", str(free_port())], cwd=tmp_path,
                          env=lab_env(), text=True, capture_output=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: --host 0.0.0.0 (or $GRADIO_SERVER_NAME) serves this lab beyond this machine, and it is the owner's lab "
        "(Batch, sweeps, any path): set LAB_PUBLIC=1 to serve it in public mode, LAB_PUBLIC=0 to serve the owner's "
        "lab there anyway, or --host 127.0.0.1"]
    assert not (tmp_path / "r").exists()  # refused before anything was made
