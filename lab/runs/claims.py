"""Claiming a run's name in a runs folder, across processes: no run ever replaces another unasked.

A name is taken when its result file or its checkpoint exists, when the caller's `taken` check says so (a run
in the store), or when another process is writing it now. Every decision is made under a short folder lock
(`.lab-runs.lock`), and a claimed run holds an exclusive `flock` on its checkpoint for as long as it runs, so
two processes (a CLI replay and the lab's Batch tab, two Ray sweeps …) can never write one name at once.
The result file is then written without replacing anything (unless `overwrite` was asked). Nothing here is
opened through a link (lab.security.safe_files): a name held by a link, dangling or not, is taken, and a link
where the user asked to resume or overwrite is refused in one line.
"""
from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from contextlib import contextmanager

from lab.errors import LabError
from lab.resultfiles.files import write_result_file
from lab.security import safe_files

FOLDER_LOCK = ".lab-runs.lock"
PARTIAL = ".partial.jsonl"  # the ending of a run's checkpoint, beside its NAME.json (spelled here only)
MOVES = 100  # names tried when result files keep appearing while a run is saved
# taken(final_path) -> why the name is taken (e.g. "a run in the results database"), or None
TakenFn = Callable[[Path], "str | None"]


def partial_path(out_dir: str | os.PathLike, stem: str) -> Path:
    """The checkpoint of the run whose file stem (suffix included) is `stem`: `out_dir/STEM` + PARTIAL."""
    return Path(out_dir) / f"{stem}{PARTIAL}"


class RunNameTaken(LabError):
    """The run name asked for is taken, and the caller did not ask to overwrite or resume it."""


@contextmanager
def folder_lock(out_dir: Path) -> Iterator[None]:
    """Hold the runs folder's lock while a name is chosen (a fraction of a second)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fd = safe_files.open_fd(out_dir / FOLDER_LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def _try_lock(path: Path) -> int | None:
    """An fd holding an exclusive lock on `path`, or None when another process holds it (RunNameTaken for a
    link or a special file of that name: it is never opened, nor created at a link's target)."""
    try:
        fd = safe_files.open_fd(path, os.O_RDWR | os.O_CREAT)
    except safe_files.LinkRefused as exc:
        raise RunNameTaken(str(exc)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@dataclass
class RunClaim:
    """A run name held by this process: its result file, its checkpoint (locked while held) and what happened
    to the name asked for (`note`: why another name was chosen, or None)."""

    out_dir: Path
    stem: str  # the file stem, suffix included (`NAME` or `NAME.reference`)
    suffix: str = ""
    resumed: bool = False  # the checkpoint holds an interrupted run of this name to continue
    overwrite: bool = False
    note: str | None = None
    _fd: int | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """The run name (the stem without its suffix)."""
        return self.stem[: len(self.stem) - len(self.suffix)] if self.suffix else self.stem

    @property
    def final(self) -> Path:
        return self.out_dir / f"{self.stem}.json"

    @property
    def checkpoint(self) -> Path:
        return partial_path(self.out_dir, self.stem)

    def write_final(self, result: dict) -> Path:
        """Write the finished run. Without `overwrite` an existing file is never replaced: should one have
        appeared meanwhile (a lab that does not claim names wrote it), the run goes to the next free name."""
        if self.overwrite:
            return write_result_file(self.final, result)
        with folder_lock(self.out_dir):
            path = self.final
            for _ in range(MOVES):
                if not safe_files.entry_exists(path):
                    try:
                        return write_result_file(path, result, replace=False)
                    except FileExistsError:  # made by a process that takes no folder lock, just now
                        pass
                stem = next_free_stem(self.out_dir, self.name, self.suffix) + self.suffix
                self.note = f"{path.name} appeared while the run was going; saved as {stem}.json instead"
                path = self.out_dir / f"{stem}.json"
            raise RunNameTaken(f"run '{self.name}': {MOVES} names in a row appeared in {self.out_dir} while it was "
                               "saved; the run's steps are kept in its checkpoint: resume it under another --name")

    def release(self) -> None:
        """Let the name go. A checkpoint holding finished steps stays for a later --resume; one holding none
        (the run failed before its first step) goes, so the name is free again."""
        if self._fd is None:
            return
        with folder_lock(self.out_dir):
            if _holds_no_step(self.checkpoint):
                self.checkpoint.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RunClaim":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holds_no_step(checkpoint: Path) -> bool:
    """True for a checkpoint with at most its header line (nothing to resume); False for a link or another
    kind of file of that name (never read, never removed: it is not this lab's)."""
    try:
        with safe_files.open_file(checkpoint, "rb") as fh:
            fh.readline()
            return not fh.readline().strip()
    except (FileNotFoundError, safe_files.LinkRefused):
        return False


def _link_in_the_way(out_dir: Path, stem: str) -> str | None:
    """The refusal of a link (or special file) holding the run's result or checkpoint name, or None."""
    for path in (partial_path(out_dir, stem), out_dir / f"{stem}.json"):
        problem = safe_files.link_problem(path)
        if problem is not None:
            return problem
    return None


def _why_taken(out_dir: Path, stem: str, taken: TakenFn | None) -> str | None:
    """Why the run name `stem` is not free: any entry of its checkpoint's or result's name (a dangling link
    too), or the caller's `taken`; None when it is free."""
    final, partial = out_dir / f"{stem}.json", partial_path(out_dir, stem)
    for path, held in ((partial, "holds an interrupted run"), (final, "holds a finished run")):
        if safe_files.link_problem(path) is not None:
            return f"{path.name} is a symbolic link or special file"
        if safe_files.entry_exists(path):
            return f"{path.name} {held}"
    return taken(final) if taken is not None else None


def next_free_stem(out_dir: Path, name: str, suffix: str = "", taken: TakenFn | None = None) -> str:
    """`name-2`, `name-3` …: the first run name whose files (`NAME{suffix}.json`, its checkpoint) do not exist
    and that `taken` does not claim."""
    k = 2
    while _why_taken(out_dir, f"{name}-{k}{suffix}", taken) is not None:
        k += 1
    return f"{name}-{k}"


def claim_run(out_dir: str | os.PathLike, name: str, *, suffix: str = "", resume: bool = False,
              overwrite: bool = False, explicit: bool = False, taken: TakenFn | None = None) -> RunClaim:
    """Claim the run `name` (files `NAME{suffix}.json` and its checkpoint) in `out_dir` for this process.

    - Free: it is claimed. Another process writing it now: a RunNameTaken naming that, whatever was asked.
    - `resume` and an interrupted run of that name: claimed to continue it (`resumed`); `resume` and a name
      taken otherwise (a finished run): refused, there is nothing to resume.
    - `overwrite`: claimed to be replaced (its checkpoint, if any, is started over).
    - Otherwise taken: an `explicit` name (the user's `--name`) is refused with a message naming --resume and
      --overwrite; a name the lab made up moves to the next free `name-2`, `name-3` … (`note` says why).
    """
    out = Path(out_dir)
    with folder_lock(out):
        stem = name + suffix
        checkpoint = partial_path(out, stem)
        link = _link_in_the_way(out, stem)
        if link is not None and (explicit or resume or overwrite):
            raise RunNameTaken(f"run '{name}': {link}")
        if link is None and safe_files.entry_exists(checkpoint):
            fd = _try_lock(checkpoint)
            if fd is None:
                if explicit or resume or overwrite:
                    raise RunNameTaken(f"run '{name}': another process is writing {checkpoint.name} in {out} now; "
                                       "wait for it to finish or pick another run name")
                return _claim_new(out, name, suffix, taken, f"another process is writing {checkpoint.name} now")
            if resume or overwrite:
                return RunClaim(out, stem, suffix, resumed=resume and not overwrite, overwrite=overwrite, _fd=fd)
            os.close(fd)
        why = _why_taken(out, stem, taken)
        if resume and why is not None and not overwrite:
            raise RunNameTaken(f"run '{name}' has nothing to resume in {out} ({why}); drop --resume to run it "
                               "again under a new name, or pass --overwrite to replace it")
        if why is None or overwrite:
            return RunClaim(out, stem, suffix, overwrite=overwrite, _fd=_lock_new(checkpoint))
        if explicit:
            hint = ("pass --resume to continue it, " if safe_files.entry_exists(checkpoint) else "") + \
                   "pass --overwrite to replace it, or pick another --name"
            raise RunNameTaken(f"run '{name}' is taken in {out} ({why}); {hint}")
        return _claim_new(out, name, suffix, taken, why)


def _lock_new(checkpoint: Path) -> int:
    fd = _try_lock(checkpoint)
    if fd is None:  # cannot happen under the folder lock unless a lab without claims writes it
        raise RunNameTaken(f"another process is writing {checkpoint} now; pick another run name")
    return fd


def _claim_new(out: Path, name: str, suffix: str, taken: TakenFn | None, why: str) -> RunClaim:
    """Claim the next free `name-k` (called under the folder lock)."""
    new = next_free_stem(out, name, suffix, taken)
    stem = new + suffix
    claim = RunClaim(out, stem, suffix, _fd=_lock_new(partial_path(out, stem)))
    claim.note = f"run '{name}' is taken ({why}); this run is '{new}'"
    return claim


def check_run_name(out_dir: str | os.PathLike, name: str, **options) -> str | None:
    """What claim_run would do now, without holding the name: raises its RunNameTaken, else returns its note
    (the name the run would get instead), or None when the name is free. A folder that does not exist yet is
    not made (no file can hold the name there)."""
    if not Path(out_dir).is_dir():
        taken = options.get("taken")
        why = taken(Path(out_dir) / f"{name}{options.get('suffix', '')}.json") if taken is not None else None
        if why is None:
            return None
    with claim_run(out_dir, name, **options) as claim:
        return claim.note
