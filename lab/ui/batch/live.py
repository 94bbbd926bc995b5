"""Stream a long job's snapshots to a Gradio generator: the job runs in a thread and reports each
snapshot; the generator yields the latest one (never a backlog) and says "stopping" at once on Stop."""
from __future__ import annotations

import queue
import threading
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")
_END = object()


def live_updates(work: Callable[[Callable[[T], None]], None], stop: threading.Event,
                 stopping: Callable[[T], T] | None = None, poll_s: float = 0.1) -> Iterator[T]:
    """Run `work(report)` in a thread; yield each reported snapshot (the latest when several wait), marked
    by `stopping` once `stop` is set. An exception in `work` is raised here after its last snapshot."""
    events: queue.Queue = queue.Queue()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            work(events.put)
        except BaseException as exc:  # noqa: BLE001 - handed to the generator's caller below
            failure.append(exc)
        finally:
            events.put(_END)

    threading.Thread(target=run, name="lab-live", daemon=True).start()
    latest: list = []
    shown_stopping = False
    while True:
        try:
            items = [events.get(timeout=poll_s)]
        except queue.Empty:  # Stop pressed: say so at once, before the work has wound down
            if stop.is_set() and not shown_stopping and latest and stopping is not None:
                shown_stopping = True
                yield stopping(latest[0])
            continue
        while items[-1] is not _END and not events.empty():  # skip to the latest snapshot
            items.append(events.get())
        ended = items[-1] is _END
        snapshots = [i for i in items if i is not _END]
        if snapshots:
            latest[:] = snapshots[-1:]
            if stop.is_set() and stopping is not None:
                shown_stopping = True
                yield stopping(latest[0])
            else:
                yield latest[0]
        if ended:
            if failure:
                raise failure[0]
            return
