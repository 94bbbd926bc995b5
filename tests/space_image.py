"""Build and run the lab's Space image with podman on these machines (../shared/space-image/README.md):
the stand-in base (`make_base.sh`), `--runtime runc`, `--network=host`. For the container tests and
bench/bench_space_image.py. Every container started here is removed; images stay cached (podman's layers)."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tests.helpers_servers import free_port, wait_http
from tests.paths import EXCERPT, REPO

BASE = "localhost/bookworm-py"
MAKE_BASE = REPO.parent / "shared" / "space-image" / "make_base.sh"
TAG = "localhost/tb2lite-lab-space-test"
REPLAY_URL_PATH = "/replay/replay_full.jsonl"
BUILD_PORT = 38529  # fixed, so that the build arguments (URLs) and with them podman's cache stay the same
APP = "/home/user/app"
# The published runs the test's loopback server has (../shared/tb2lite/published/): their run names.
PUBLISHED = "llada21_flash_transformers_sample10_suffix_len256; llada21_flash_transformers_smoke"


class PodmanMissing(AssertionError):
    """podman or the stand-in base is not there: a failure (the README's test command installs both)."""


def podman() -> list[str]:
    """The podman command line prefix (runc: crun cannot start containers under these machines' cgroups)."""
    exe = shutil.which("podman")
    if exe is None:
        raise PodmanMissing("podman is not installed: run `bash scripts/test.sh` (it runs "
                            "../shared/space-image/make_base.sh, which installs podman, debootstrap and runc)")
    return [exe, "--runtime", "runc"]


def require_base() -> None:
    """The stand-in for python:3.11-slim must exist (made by make_base.sh)."""
    if subprocess.run([*podman(), "image", "exists", BASE], capture_output=True).returncode != 0:
        raise PodmanMissing(f"the base image {BASE} is missing: run `bash {MAKE_BASE}` (scripts/test.sh does)")


def pypi_index() -> str:
    """PyPI's simple index as pip here knows it: the torch line's index (PyTorch's own is unreachable here)."""
    from pip._internal.models.index import PyPI

    return PyPI.simple_url


def excerpt_sha256() -> str:
    return hashlib.sha256(EXCERPT.read_bytes()).hexdigest()


def served_files() -> dict[str, bytes]:
    """What the build's loopback server serves: the excerpt standing in for the public replay file, and the
    published result files under their catalogue paths."""
    from tests.published_server import catalogue_files

    return {REPLAY_URL_PATH: EXCERPT.read_bytes(), **catalogue_files()}


@contextmanager
def build_server() -> Iterator[str]:
    """The loopback server the build downloads from (served_files()), on BUILD_PORT when it is free: the
    same URLs in the build arguments each run, so podman's cache keeps even the download layers."""
    from tests.published_server import published_server

    with ExitStack() as stack:
        try:
            base, _ = stack.enter_context(published_server(served_files(), port=BUILD_PORT))
        except OSError:  # the port is taken: a free one (the layers from the replay download on are rebuilt)
            base, _ = stack.enter_context(published_server(served_files()))
        yield base


@dataclass
class Build:
    tag: str
    seconds: float
    log: str


def image_id(tag: str) -> str | None:
    out = subprocess.run([*podman(), "image", "inspect", tag, "--format", "{{.Id}}"], capture_output=True, text=True)
    return out.stdout.strip() or None if out.returncode == 0 else None


def build_image(base_url: str, log_path: Path, tag: str = TAG, context: Path = REPO, extra: dict | None = None,
                timeout: float = 3000.0) -> Build:
    """`podman build` the Space image from `context` with the replay baked in and the published runs fetched,
    both from `base_url` (a loopback server). The previous image of `tag` is removed when replaced."""
    require_base()
    args = {"BASE": BASE, "TORCH_INDEX": pypi_index(),
            "LAB_REPLAY_URL": f"{base_url}{REPLAY_URL_PATH}", "LAB_REPLAY_SHA256": excerpt_sha256(),
            "LAB_REPLAY_SIZE": str(EXCERPT.stat().st_size),
            "LAB_PUBLISHED": PUBLISHED, "LAB_PUBLISHED_BASE_URL": base_url, **(extra or {})}
    before = image_id(tag)
    cmd = [*podman(), "build", "--network=host", *(f"--build-arg={k}={v}" for k, v in args.items()), "-t", tag,
           str(context)]
    started = time.monotonic()
    with open(log_path, "wb") as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout)
    seconds = time.monotonic() - started
    text = log_path.read_text(errors="replace").replace("\0", "")
    if done.returncode != 0:
        raise AssertionError(f"podman build failed (exit {done.returncode}):\n{text[-4000:]}")
    after = image_id(tag)
    if before and before != after:  # the replaced image's own layers; shared ones stay (in use)
        subprocess.run([*podman(), "rmi", before], capture_output=True)
    return Build(tag, seconds, text)


def image_size(tag: str = TAG) -> int:
    out = subprocess.run([*podman(), "image", "inspect", tag, "--format", "{{.Size}}"], capture_output=True,
                         text=True, check=True)
    return int(out.stdout.strip())


@dataclass
class Container:
    cid: str
    url: str
    start_s: float  # `podman run` to the page answering 200


@contextmanager
def space_container(tag: str = TAG, env: dict[str, str] | None = None, timeout: float = 420.0,
                    space: bool = True) -> Iterator[Container]:
    """Run the image as a Space runs it: SPACE_ID set (`space=False`: as `docker run IMAGE` would, without
    it), uid 1000, PORT a free port (on 127.0.0.1 here, since the container shares the host's network);
    yields once the page answers; the container is removed after."""
    port = free_port()
    env = {**({"SPACE_ID": "owner/tb2lite-lab"} if space else {}), "PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1",
           "GRADIO_ANALYTICS_ENABLED": "False", **(env or {})}
    cmd = [*podman(), "run", "-d", "--network=host", "--user", "1000", *(f"--env={k}={v}" for k, v in env.items()), tag]
    started = time.monotonic()
    cid = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    url = f"http://127.0.0.1:{port}/"
    try:
        try:
            wait_http(url, timeout)
        except TimeoutError:
            raise AssertionError(f"the container did not serve {url}:\n{logs(cid)[-3000:]}") from None
        yield Container(cid, url, time.monotonic() - started)
    finally:
        subprocess.run([*podman(), "rm", "-f", "-t", "0", cid], capture_output=True)


def run_to_the_end(tag: str, env: dict[str, str], timeout: float = 300.0) -> subprocess.CompletedProcess:
    """`podman run` the image's own command to its end (a start that is refused), the container removed."""
    cmd = [*podman(), "run", "--rm", "--network=host", "--user", "1000", *(f"--env={k}={v}" for k, v in env.items()), tag]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def logs(cid: str) -> str:
    out = subprocess.run([*podman(), "logs", cid], capture_output=True, text=True)
    return out.stdout + out.stderr


def changed_paths(cid: str) -> list[str]:
    """`podman diff`: every path the container added, changed or deleted (lines "A /path")."""
    out = subprocess.run([*podman(), "diff", cid], capture_output=True, text=True, check=True)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def changed_by_podman(tag: str = TAG) -> set[str]:
    """What `podman diff` shows for a container of `tag` that ran nothing (`true`): podman's own mount
    points (/etc/hosts, /etc/resolv.conf under /etc), not the app's writes."""
    cid = subprocess.run([*podman(), "run", "-d", "--network=host", "--user", "1000", tag, "true"],
                         capture_output=True, text=True, check=True).stdout.strip()
    try:
        subprocess.run([*podman(), "wait", cid], capture_output=True, timeout=60)
        return set(changed_paths(cid))
    finally:
        subprocess.run([*podman(), "rm", "-f", "-t", "0", cid], capture_output=True)


def stop_with_sigterm(cid: str, limit: float) -> tuple[float, bool]:
    """Send SIGTERM and wait up to `limit` s for the container to stop: (seconds, stopped)."""
    started = time.monotonic()
    subprocess.run([*podman(), "kill", "--signal", "TERM", cid], capture_output=True, check=True)
    while time.monotonic() - started < limit:
        state = subprocess.run([*podman(), "inspect", cid, "--format", "{{.State.Running}}"], capture_output=True,
                               text=True).stdout.strip()
        if state == "false":
            return time.monotonic() - started, True
        time.sleep(0.1)
    return time.monotonic() - started, False
