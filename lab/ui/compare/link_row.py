"""Where Compare shows its link: the "copy link" box and the line about a link that named what is not here
(lab.ui.compare.link fills them)."""
from __future__ import annotations

import gradio as gr

from lab.ui.shell.links import link_box

LINK_ID = "lab-compare-link"
NOTE_ID = "lab-compare-link-note"


def build_link_row() -> tuple[gr.Textbox, gr.HTML]:
    """Inside Compare's layout: (the link box, the link's line)."""
    with gr.Row(equal_height=True):
        box = link_box(LINK_ID)
    return box, gr.HTML(elem_id=NOTE_ID)
