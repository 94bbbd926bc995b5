"""The lab's Gradio queue polls for events at the lab's intervals (lab.ui.shell.public.queue_app), not every
millisecond, and still answers events; bench/bench_idle_lab.py measures what that saves an idle lab."""
from __future__ import annotations

import gradio as gr
from gradio_client import Client

from lab.ui.shell.public import QUEUE_IDLE_POLL_SEC, QUEUE_PROGRESS_POLL_SEC, queue_app
from tests.helpers_servers import free_port


def test_the_queue_polls_at_the_labs_intervals_and_answers_events():
    with gr.Blocks() as demo:
        box = gr.Textbox()
        out = gr.Textbox()
        box.submit(lambda text: text.upper(), box, out, api_name="shout")
    assert queue_app(demo, {"default_concurrency_limit": 2}) is demo
    queue = demo._queue
    assert (queue.sleep_when_free, queue.progress_update_sleep_when_free) == (QUEUE_IDLE_POLL_SEC,
                                                                              QUEUE_PROGRESS_POLL_SEC)
    assert queue.default_concurrency_limit == 2  # the options reach demo.queue()
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        assert Client(f"http://127.0.0.1:{port}/", verbose=False).predict("ls -la", api_name="/shout") == "LS -LA"
    finally:
        demo.close()
