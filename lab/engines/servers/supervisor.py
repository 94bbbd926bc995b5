"""`ManagedServer`: one model server process the lab starts, watches and stops.

The command runs in its own session (so its whole process group can be signalled), on a free
127.0.0.1 port, writing stdout and stderr to its own log file. On Linux the child is also told
to die with the lab (prctl PR_SET_PDEATHSIG), so a killed lab leaves no server behind; every
live server is in a registry that `stop_all()` (atexit, SIGTERM/SIGINT) empties.

States: starting -> ready; crashed (the process exited on its own, exit code kept); stopped
(the lab stopped it). `tail(n)` gives the log's last lines: the real root cause of a failure.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import httpx

from lab.errors import EngineLoadError

STARTING, READY, CRASHED, STOPPED = "starting", "ready", "crashed", "stopped"
READY_PATHS = ("/health", "/v1/models")
READY_POLL_S = 0.1  # a refused connection costs microseconds; the start is seen within 0.1 s
READY_POLL_ANSWERED_S = 0.5  # once the server answers, not yet 200
PR_SET_PDEATHSIG = 1
TAIL_LINES = 30
START_MARK = "lab starts:"  # the lab's own line before the command it runs

ArgvBuilder = Callable[[int], list[str]]


class ServerFailed(EngineLoadError):
    """A managed server exited or never answered; the message ends with its log's last lines."""


def free_port() -> int:
    """A TCP port of 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _load_prctl():
    """libc's prctl, loaded once in the lab (never in a freshly forked child); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()


def _die_with_parent(parent_pid: int) -> Callable[[], None] | None:
    """A preexec_fn asking Linux to SIGTERM the child when the lab dies (None where unsupported).
    It only makes system calls: the lab has threads, so the child must not allocate or lock."""
    if _prctl is None:
        return None

    def preexec() -> None:
        _prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
        if os.getppid() != parent_pid:  # the lab died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


# PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, so every server is
# started from this one long-lived thread, never from a short-lived loader thread.
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-server-spawner")


def _spawn(argv: list[str], env: dict, log_file) -> subprocess.Popen:
    preexec = _die_with_parent(os.getpid())
    return subprocess.Popen(
        argv, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        start_new_session=True, preexec_fn=preexec, close_fds=True,
    )


class ManagedServer:
    """A supervised server process: start, wait until it answers, watch, stop, restart.

    `build_argv(port)` returns the command for a port; `env` is added to the lab's environment
    (a value of None removes that variable).
    Thread-safe; `state` notices a process that died on its own (-> crashed, exit code kept)."""

    def __init__(
        self,
        name: str,
        build_argv: ArgvBuilder,
        log_path: str | Path,
        *,
        env: dict[str, str | None] | None = None,
        ready_timeout: float = 600.0,
        stop_grace: float = 10.0,
        ready_paths: tuple[str, ...] = READY_PATHS,
    ) -> None:
        self.name = name
        self.build_argv = build_argv
        self.log_path = Path(log_path)
        self.env = dict(env or {})
        self.ready_timeout = ready_timeout
        self.stop_grace = stop_grace
        self.ready_paths = ready_paths
        self.port: int | None = None
        self.argv: list[str] = []
        self.exit_code: int | None = None
        self.started_at: float | None = None
        self.ready_after_s: float | None = None
        self._proc: subprocess.Popen | None = None
        self._state = STOPPED
        self._stopping = False
        self._lock = threading.RLock()

    # --- what the UI reads ------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def state(self) -> str:
        """starting | ready | crashed | stopped (a dead process is noticed here and by its watcher)."""
        proc = self._proc
        if proc is not None:
            code = proc.poll()
            if code is not None:
                self._on_exit(proc, code)
        return self._state

    def _watch(self, proc: subprocess.Popen) -> None:
        """Wait for the process in a daemon thread, so a crash is handled the moment it happens."""
        try:
            code = proc.wait()
        except Exception:  # noqa: BLE001 - the interpreter is shutting down
            return
        self._on_exit(proc, code)

    def _on_exit(self, proc: subprocess.Popen, code: int) -> None:
        """The server exited on its own: mark it crashed, kill what is left of its process group
        (vLLM's EngineCore and Worker children survive their API server) and say so in its log."""
        with self._lock:
            if proc is not self._proc or self._stopping or self._state not in (STARTING, READY):
                return
            self._state, self.exit_code = CRASHED, code
            _registry.discard(self)  # with the state: nobody sees a crashed server among the live ones
        survivors = group_members(proc.pid)
        _signal_group(proc.pid, signal.SIGKILL)
        left = (f"; killed the {len(survivors)} process(es) left in its group: {', '.join(survivors)}" if survivors
                else "; no other process of its group was alive")
        self._log_line(f"lab: the server process (pid {proc.pid}) exited on its own with code "
                       f"{describe_exit(code)}{left}")

    def _log_line(self, text: str) -> None:
        """Append one line of the lab's own to the server's log (what the log tail then explains)."""
        try:
            with open(self.log_path, "a", encoding="utf-8") as log:
                log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n")
        except OSError:
            pass

    def status_text(self) -> str:
        """`ready`, `starting`, `stopped: exit code N (SIGKILL)`, … for one line in the UI."""
        state = self.state
        if state in (CRASHED, STOPPED) and self.exit_code is not None:
            return f"stopped: exit code {describe_exit(self.exit_code)}"
        return state

    def tail(self, n: int = TAIL_LINES, since_start: bool = False) -> list[str]:
        """The last `n` lines of the log (empty when there is none yet); `since_start`: only those
        after the lab's last `lab starts:` line (the log keeps earlier starts)."""
        try:
            with open(self.log_path, "r", encoding="utf-8", errors="replace") as log:
                lines = [line.rstrip("\n") for line in deque(log, maxlen=n)]
        except OSError:
            return []
        if since_start:
            starts = [i for i, line in enumerate(lines) if START_MARK in line]
            lines = lines[starts[-1] + 1:] if starts else lines
        return lines

    def failure_text(self, n: int = 12) -> str:
        """`stopped: exit code N` (or the state) followed by the log's last lines."""
        lines = "\n".join(self.tail(n))
        where = f" (log {self.log_path})"
        return f"{self.status_text()}{where}" + (f"\n{lines}" if lines else "")

    # --- life cycle --------------------------------------------------------------------
    def start(self) -> None:
        """Start the process on a free port (no waiting; see `wait_ready`)."""
        with self._lock:
            if self.state in (STARTING, READY):
                return
            self.port = free_port()
            self.argv = [str(a) for a in self.build_argv(self.port)]
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            env = {k: v for k, v in {**os.environ, **self.env}.items() if v is not None}  # None: unset
            with open(self.log_path, "ab") as log:
                log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {START_MARK} {' '.join(self.argv)}\n".encode())
                log.flush()
                try:
                    self._proc = _spawner.submit(_spawn, self.argv, env, log).result()
                except OSError as exc:
                    self._state = CRASHED
                    raise ServerFailed(f"cannot start '{self.argv[0]}' for {self.name}: {exc.strerror or exc}") from None
            self._state, self.exit_code = STARTING, None
            self.started_at = time.monotonic()
            self.ready_after_s = None
            _registry.add(self)
            threading.Thread(target=self._watch, args=(self._proc,), name=f"watch-{self.name}", daemon=True).start()

    def wait_ready(self, timeout: float | None = None) -> None:
        """Poll the ready paths until one answers 200; ServerFailed (with the log's tail) when the
        process exits first or `timeout` (default `ready_timeout`) passes."""
        deadline = time.monotonic() + (self.ready_timeout if timeout is None else timeout)
        pause = READY_POLL_S
        with httpx.Client(timeout=2.0) as client:
            while True:
                state = self.state
                if state == READY:
                    return
                if state != STARTING:
                    raise ServerFailed(f"{self.name}: server {self.failure_text()}")
                for path in self.ready_paths:
                    try:
                        if client.get(self.base_url + path).status_code == 200:
                            with self._lock:
                                if self._state == STARTING:
                                    self._state = READY
                                    self.ready_after_s = time.monotonic() - (self.started_at or time.monotonic())
                            break
                        pause = READY_POLL_ANSWERED_S  # up, not ready yet: each ask is a line of its log
                    except httpx.HTTPError:
                        continue
                if self.state == READY:
                    return
                if time.monotonic() > deadline:
                    self.stop()
                    raise ServerFailed(
                        f"{self.name}: server did not answer {' or '.join(self.ready_paths)} within "
                        f"{self.ready_timeout if timeout is None else timeout:.0f} s; stopped it (log {self.log_path})\n"
                        + "\n".join(self.tail(12))
                    )
                time.sleep(pause)

    def stop(self, grace: float | None = None) -> None:
        """TERM the whole process group, KILL it after `grace` seconds; state -> stopped."""
        grace = self.stop_grace if grace is None else grace
        with self._lock:
            proc = self._proc
            if proc is None or self._stopping:
                if proc is None:
                    self._state = STOPPED
                return
            self._stopping = True
        try:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc.pid, signal.SIGKILL)  # children that ignored TERM, or the leader itself
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            wait_group_gone(proc.pid, 10.0)  # vLLM's engine core may outlive its leader by a moment
        finally:
            with self._lock:
                if self._state != CRASHED:
                    self.exit_code = proc.returncode
                    self._state = STOPPED
                self._stopping = False
                _registry.discard(self)

    def restart(self, timeout: float | None = None) -> None:
        """Stop (if running), start on a fresh port and wait until it answers."""
        self.stop()
        with self._lock:
            self._state = STOPPED
        self.start()
        self.wait_ready(timeout)

    def process_ids(self) -> list[int]:
        """The server's PID and its descendants' (vLLM runs its engine core in a child)."""
        pid = self.pid
        if pid is None or self.state not in (STARTING, READY):
            return []
        try:
            import psutil

            return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
        except Exception:  # noqa: BLE001 - psutil missing or the process just went
            return [pid]

    def __repr__(self) -> str:
        return f"<ManagedServer {self.name!r} {self.status_text()} pid={self.pid} port={self.port}>"


def without_command(line: str) -> str:
    """A log line as a public deployment's visitor sees it: the lab's own start line keeps only the
    executable's name (its command line names the server's folders); other lines as they are."""
    head, mark, command = line.partition(f" {START_MARK} ")
    if not mark or not head.startswith("=== "):
        return line
    exe = command.split(" ", 1)[0]
    return f"{head} {START_MARK} {exe.rsplit('/', 1)[-1]} …"


def describe_exit(code: int) -> str:
    """`1`, or `-9 (SIGKILL)` for a process ended by a signal."""
    if code < 0:
        try:
            return f"{code} ({signal.Signals(-code).name})"
        except ValueError:
            return str(code)
    return str(code)


def group_members(pgid: int) -> list[str]:
    """`name (pid)` of every live process in the process group `pgid` (empty without psutil)."""
    try:
        import psutil
    except ImportError:
        return []
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{proc.info['name']} ({proc.pid})")
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return found


def wait_group_gone(pgid: int, timeout: float) -> bool:
    """Wait until no live process is left in group `pgid` (their memory, GPU memory included, is
    free for the next server to profile); True when none is."""
    deadline = time.monotonic() + timeout
    while group_members(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # start_new_session: the group id is the leader's pid
    except (ProcessLookupError, PermissionError):
        pass


class _Registry:
    """Every server started and not yet stopped, so none outlives the lab."""

    def __init__(self) -> None:
        self._servers: set[ManagedServer] = set()
        # re-entrant: a second SIGTERM/SIGINT arriving while the exit handler holds it runs the handler again
        # on the same (main) thread, which with a plain Lock waited for itself forever
        self._lock = threading.RLock()

    def add(self, server: ManagedServer) -> None:
        with self._lock:
            self._servers.add(server)

    def discard(self, server: ManagedServer) -> None:
        with self._lock:
            self._servers.discard(server)

    def live(self) -> list[ManagedServer]:
        with self._lock:
            return list(self._servers)


_registry = _Registry()


def live_servers() -> list[ManagedServer]:
    """Servers started and not stopped (crashed ones leave the list when noticed)."""
    return _registry.live()


def stop_all(grace: float = 5.0) -> None:
    """Stop every live server (TERM all groups at once, then KILL what is left)."""
    servers = _registry.live()
    for server in servers:
        if server.pid is not None:
            _signal_group(server.pid, signal.SIGTERM)
    for server in servers:
        server.stop(grace)


_handlers_installed = False
FORCE_AFTER_S = 10.0  # a repeated Ctrl-C or SIGTERM this long after the first ends the process at once
_exit_began: float | None = None  # time.monotonic() of the first SIGTERM or SIGINT


def _say(text: str) -> None:
    """One line to stderr from a signal handler (os.write: a print there may land inside another print)."""
    try:
        os.write(2, f"{text}\n".encode())
    except OSError:
        pass


def _repeated_signal(signum: int) -> None:
    """A second Ctrl-C or SIGTERM while the lab stops. Within FORCE_AFTER_S of the first it is let pass: the
    first one's exit goes on (servers stopped, the results store closed cleanly, exports deleted), where an
    exception raised now would cut it short with a traceback. Later, the exit is stuck: kill the servers'
    process groups and end now."""
    waited = time.monotonic() - (_exit_began or 0.0)
    if waited < FORCE_AFTER_S:
        _say(f"already stopping; a {signal.Signals(signum).name} more than {FORCE_AFTER_S:.0f} s after the first "
             "ends the lab at once")
        return
    _say(f"the lab has not stopped {waited:.0f} s after the first signal: ending it now")
    for server in _registry.live():
        if server.pid is not None:
            _signal_group(server.pid, signal.SIGKILL)
    os._exit(128 + signum)


def install_exit_handlers() -> None:
    """Stop every managed server when the lab exits: atexit, SIGTERM and SIGINT (then the previous
    handler runs, so Ctrl-C still interrupts; a repeat while the lab stops: `_repeated_signal`). Call from
    the main thread."""
    global _handlers_installed
    if _handlers_installed or threading.current_thread() is not threading.main_thread():
        return
    _handlers_installed = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)

        def handler(signum, frame, previous=previous):
            global _exit_began
            if _exit_began is not None:
                _repeated_signal(signum)
                return
            _exit_began = time.monotonic()
            stop_all()
            if callable(previous) and previous not in (signal.SIG_IGN, signal.SIG_DFL):
                previous(signum, frame)
            elif signum == signal.SIGINT:
                raise KeyboardInterrupt
            else:
                raise SystemExit(128 + signum)

        signal.signal(sig, handler)


atexit.register(stop_all)


def exit_promptly(code: int | str | None) -> None:
    """End the process now with `code` (SystemExit's meaning): the atexit handlers (managed servers stopped,
    export folders deleted) and flushed output, then `os._exit`, skipping the interpreter's teardown. That
    teardown collects the whole heap of Gradio, pandas and torch objects: 6-11 s on a loaded 2-core machine,
    while a Space (or any container) must stop within 10 s of SIGTERM. What the results store committed is
    in its file or WAL already."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr, flush=True)
        code = 1
    os._exit(code or 0)
