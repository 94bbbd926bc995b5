"""Links that open a view, and views that name their link.

`?tab=compare&step=TASK/STEP&engines=A,B`, `?tab=results&baseline=RUN&series=NAME`, `?tab=triage&…&baseline=RUN
&candidate=RUN`, `?tab=engines`, `?tab=batch`. A link is read once when the page loads (each tab reads its own
part); every tab shows the link of what is on screen in a "copy link" box, and writes it into the address bar
as the view moves (lab.ui.shell.links's JS: the first write replaces the entry, later ones push one, and the
browser's back button reloads the page at the entry it goes back to), so back and reload keep the place.

A link is input like any other: only its known parameters are read, each cut to MAX_VALUE characters or
dropped with one line, an unknown tab is ignored with one line, and what it names is looked up, never
executed: `engines=` names engine columns or stored runs, never an engine SPEC, so a link cannot load a model
or reach a server. Every line shown about a link is escaped text.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping
from urllib.parse import urlencode

import gradio as gr

from lab.ui.shell.html_text import esc

TABS = ("compare", "engines", "batch", "results", "triage")
PARAMS = ("tab", "step", "engines", "baseline", "candidate", "series")
MAX_VALUE = 300       # characters of one parameter's value
MAX_ENGINES = 12      # columns one link may name
SHOWN = 60            # characters of a value echoed in a line


@dataclass
class Link:
    """The view a page's address names (only its known parameters, checked) and what was wrong with it."""

    tab: str | None = None
    values: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def get(self, name: str) -> str:
        return self.values.get(name, "")

    def for_tab(self, tab: str) -> bool:
        return self.tab == tab


def shown(value: str) -> str:
    """A value as a line may echo it: one line, cut to SHOWN characters (still to be escaped where HTML)."""
    text = " ".join(str(value).split())
    return text if len(text) <= SHOWN else text[:SHOWN] + "…"


def _items(query: Any) -> list[tuple[str, str]]:
    if query is None:
        return []
    if hasattr(query, "multi_items"):
        return [(str(k), str(v)) for k, v in query.multi_items()]
    return [(str(k), str(v)) for k, v in dict(query).items()]


def read_link(query: Any) -> Link:
    """The link of a query (Starlette's QueryParams, a mapping): the known parameters, first value of each."""
    link = Link()
    for key, value in _items(query):
        if key not in PARAMS or key in link.values:
            continue
        value = "".join(c for c in value if c.isprintable()).strip()
        if len(value) > MAX_VALUE:
            link.notes.append(f"the link's '{key}' ({len(value):,} characters) was ignored: at most {MAX_VALUE}")
            continue
        if value:
            link.values[key] = value
    tab = link.values.pop("tab", "").lower()
    if tab and tab not in TABS:
        link.notes.append(f"this lab has no tab '{shown(tab)}'; it opened on its first tab")
    elif tab:
        link.tab = tab
    return link


def request_link(request: gr.Request | None) -> Link:
    """The link of the page a request comes from (an empty link outside a page load)."""
    params = getattr(request, "query_params", None) if request is not None else None
    return read_link(params)


def listed(value: str, limit: int = MAX_ENGINES) -> tuple[list[str], list[str]]:
    """`A,B,C` as names, each once, at most `limit` (the rest: a line saying how many were left out)."""
    names: list[str] = []
    for part in value.split(","):
        part = part.strip()
        if part and part not in names:
            names.append(part)
    notes = [f"the link names {len(names)} columns; the first {limit} were opened"] if len(names) > limit else []
    return names[:limit], notes


def link_url(base: str, tab: str, values: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> str:
    """`base?tab=TAB&…` with the given parameters (empty ones left out), in order."""
    items = list(values.items()) if isinstance(values, Mapping) else list(values)
    query = urlencode([("tab", tab), *[(k, str(v)) for k, v in items if v not in (None, "", [])]])
    return f"{base}?{query}"


def page_url(request: gr.Request) -> str:
    """The page's own address without its query (the browser's Referer; the queue URL is not it)."""
    referer = (request.headers or {}).get("referer") if hasattr(request, "headers") else None
    return str(referer or request.base_url).split("?")[0]


def base_of(request: gr.Request | None) -> str:
    """page_url, or "" outside a request."""
    return page_url(request) if request is not None else ""


MAX_NOTES = 3  # lines about one link shown in full; the rest counted


def notice_html(notes: Iterable[str]) -> str:
    """What was wrong with a link, as one escaped line ("" when nothing was)."""
    notes = [n for n in notes if n]
    more = len(notes) - MAX_NOTES
    text = "; ".join(notes[:MAX_NOTES]) + (f"; and {more} more" if more > 0 else "")
    return f'<div class="lab-link-note" data-link-note="1">⚠ {esc(text)}</div>' if text else ""


def open_tab(request: gr.Request) -> tuple:
    """Page load: the tab the link names (unchanged when it names none), and the line about what was wrong with
    the link itself (an unknown tab, a value too long)."""
    link = request_link(request)
    return (gr.update(selected=link.tab) if link.tab else gr.update()), notice_html(link.notes)


# The address bar follows the view: `labSetUrl(boxId, link)` (assets/ui/links.js) writes a link's query into it
# when the box showing that link is on screen; an event wires it with `js=set_url_js(box_id)`.
def set_url_js(box_id: str) -> str:
    return f"(link) => {{ if (window.labSetUrl) window.labSetUrl({box_id!r}, link); return []; }}"


FOLLOW_TAB_JS = "() => { if (window.labFollowTab) window.labFollowTab(); return []; }"


def follow_tabs(tabs: gr.Tabs) -> None:
    """Whichever way the tab on screen changes (a click, "open in Compare"), the address bar takes its link."""
    tabs.change(None, None, None, js=FOLLOW_TAB_JS, api_visibility="private", show_progress="hidden")


def link_box(elem_id: str, label: str = "Link to this view") -> gr.Textbox:
    """The "copy link" control of a tab: the URL of what is on screen, with a copy button."""
    return gr.Textbox(label=label, interactive=False, buttons=["copy"], elem_id=elem_id, max_lines=1,
                      elem_classes=["lab-link-box"])


def follow_in_address_bar(box: gr.Textbox, tab: gr.Tab, elem_id: str) -> None:
    """Whenever `box` gets a new link, and whenever `tab` is shown, the address bar takes its link."""
    js = set_url_js(elem_id)
    box.change(None, box, None, js=js, api_visibility="private", show_progress="hidden")
    tab.select(None, box, None, js=js, api_visibility="private", show_progress="hidden")


def plain_tab_link(tab_id: str, request: gr.Request) -> str:
    """The link of a tab whose view has no state of its own: `?tab=ID`."""
    return link_url(base_of(request), tab_id)


def wire_tab_link(tab: gr.Tab, tab_id: str, elem_id: str) -> gr.Textbox:
    """Inside `tab`: its "copy link" box (`?tab=ID`), filled when the page loads, followed by the address bar."""
    from lab.ui.shell.wiring import bind

    box = link_box(elem_id)
    gr.on(triggers=None, fn=bind(plain_tab_link, tab_id), inputs=None, outputs=box, api_visibility="private",
          show_progress="hidden")
    follow_in_address_bar(box, tab, elem_id)
    return box
