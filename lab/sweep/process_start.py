"""Which process a pid names: a mark of its start that stays the same for the process's whole life, so a
pid reused later is never taken for it.

psutil's `create_time()` is not such a mark on Linux: it adds the boot time as read at that moment
(/proc/stat's `btime`), which moves by a second or more when the clock is adjusted, so two reads of one
running process can differ. The kernel's own count of clock ticks from boot to the process's start does
not move. Standard library and psutil only: the sweep's keepers and watchdog import this.
"""
from __future__ import annotations

import os
import sys

import psutil


def start_mark(pid: int) -> float:
    """When process `pid` began, as a value fixed for its life: on Linux the seconds from boot to its start
    (field 22 of /proc/PID/stat), elsewhere psutil's `create_time()`. Raises psutil.NoSuchProcess when
    there is no such process."""
    if not sys.platform.startswith("linux"):
        return psutil.Process(pid).create_time()
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # the name before ")" may hold spaces
    except (FileNotFoundError, ProcessLookupError):
        raise psutil.NoSuchProcess(pid) from None
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")  # fields from the 3rd: the 22nd is at 19


def same_process_running(pid: int, started: float | None = None) -> bool:
    """True while process `pid` runs (a zombie, killed and not yet reaped, does not); with `started` (a
    `start_mark`), only the process that began then, not a later one given the same pid. Never raises."""
    if pid <= 0:  # no process: psutil refuses these with ValueError
        return False
    try:
        if started is not None and start_mark(pid) != started:
            return False
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
