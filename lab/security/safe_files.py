"""Files in the lab's own folders (runs, results, cache) opened, created and replaced without following a
symbolic link: a link planted in a runs folder never makes the lab write, truncate or create a file elsewhere,
nor read a stranger's file as its own checkpoint. A name counts as taken as soon as any entry has it (a
dangling link too: `entry_exists`)."""
from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Callable

from lab.errors import LabError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class LinkRefused(LabError):
    """A path in the lab's folders is a symbolic link, or not a regular file: the lab does not open it."""


def refusal(path: str | os.PathLike) -> str:
    """The one line that refuses `path` (a link or not a regular file), naming it and what to do."""
    p = Path(path)
    if p.is_symlink():
        return (f"{p}: is a symbolic link; the lab opens nothing in its folders through a link: remove the link "
                "(or put the file it points to in its place) and run again")
    return (f"{p}: is not a regular file (a folder, FIFO or device); the lab opens only regular files in its "
            "folders: remove it, or pick another name")


def entry_exists(path: str | os.PathLike) -> bool:
    """Whether any entry has this name: a file, a folder, a link (a dangling one too)."""
    return os.path.lexists(path)


def link_problem(path: str | os.PathLike) -> str | None:
    """`refusal(path)` when the entry is a link or not a regular file; None when it is a regular file or absent."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError:
        return refusal(path)
    return None if stat.S_ISREG(mode) else refusal(path)


def open_fd(path: str | os.PathLike, flags: int, mode: int = 0o666) -> int:
    """os.open without following a link at `path`; only a regular file is opened (a FIFO never blocks it), and for
    writing only one with no other name (a hard link's other name would change too). LinkRefused for a link
    (dangling too: never created at its target), a hard link opened to write, or another kind of file."""
    truncate = bool(flags & os.O_TRUNC)  # only once the file is known to be one the lab may write
    try:
        fd = os.open(path, (flags & ~os.O_TRUNC) | _NOFOLLOW | _CLOEXEC | _NONBLOCK, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENXIO, errno.EISDIR):
            raise LinkRefused(refusal(path)) from None
        raise
    try:
        facts = os.fstat(fd)
        if not stat.S_ISREG(facts.st_mode):
            raise LinkRefused(refusal(path))
        if flags & (os.O_WRONLY | os.O_RDWR) and facts.st_nlink > 1:  # a hard link: writing it writes the other name
            raise LinkRefused(f"{path}: is a hard link (the same file has another name); the lab writes only files of "
                              "its own in its folders: remove it, or pick another name")
        if _NONBLOCK:
            os.set_blocking(fd, True)
        if truncate:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: str | os.PathLike, mode: str = "r", encoding: str | None = "utf-8") -> IO:
    """`open(path, mode)` for "r", "w", "a", "rb", "wb", "ab" (text with `encoding`), never through a link."""
    flags = {"r": os.O_RDONLY, "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
             "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND}[mode[0]]
    fd = open_fd(path, flags)
    if "b" in mode:
        return os.fdopen(fd, mode)
    return os.fdopen(fd, mode, encoding=encoding)


def read_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of a regular file, never read through a link."""
    with open_file(path, "rb") as fh:
        return fh.read()


def touch(path: str | os.PathLike) -> None:
    """Create `path` or refresh its time, never through a link."""
    fd = open_fd(path, os.O_WRONLY | os.O_CREAT)
    try:
        os.utime(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, write: Callable[[IO], None], *, replace: bool = True,
                 binary: bool = False) -> Path:
    """Write `path` whole or not at all: `write` fills a new temporary file beside it (created with O_EXCL, so
    never through a link), which then takes the name. With `replace` the entry of that name is replaced (a link
    itself, never the file it points to); without it an existing entry of any kind (a dangling link too) is
    never replaced: FileExistsError naming `path`. The file gets mode 0666 less the umask, like any file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.parent / f".{p.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o666)
    try:
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")) as fh:
            write(fh)
        if replace:
            os.replace(tmp, p)
        else:
            try:
                os.link(tmp, p)  # atomic, and refuses any existing entry
            except FileExistsError:
                raise FileExistsError(errno.EEXIST, "an entry of that name exists; nothing was replaced",
                                      str(p)) from None
            tmp.unlink()
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p


def write_bytes_atomic(path: str | os.PathLike, content: bytes, *, replace: bool = True) -> Path:
    """`write_atomic` of `content`."""
    return write_atomic(path, lambda fh: fh.write(content), replace=replace, binary=True)
