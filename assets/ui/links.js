// Links that open a view (lab/ui/shell/links.py), loaded into the page <head> by lab/ui/app.py.
// labSetUrl(boxId, link): the address bar takes the link's query when the tab holding that link's box is the
// one on screen; the first write replaces the page's entry, later ones push a new one. Back and forward reload
// the page at the entry they reach, and the page opens the view its address names.
(function () {
  let writes = 0;
  function onScreen(box) {
    const panel = box.closest('[role="tabpanel"]') || box;
    return panel.offsetParent !== null || panel.getClientRects().length > 0;
  }
  window.labSetUrl = function (boxId, link) {
    if (typeof link !== "string" || !link) return;
    setTimeout(function () {
      const box = document.getElementById(boxId);
      if (!box || !onScreen(box)) return;
      let url;
      try { url = new URL(link, window.location.href); } catch (e) { return; }
      if (url.search === window.location.search) return;  // only the query is taken: never another page
      const next = window.location.pathname + url.search;
      if (writes++ === 0) history.replaceState({lab: 1}, '', next);
      else history.pushState({lab: 1}, '', next);
    }, 60);
  };
  // The tab on screen changed (a click, or a view opened from another tab): its link box says where it is.
  window.labFollowTab = function () {
    setTimeout(function () {
      const boxes = document.querySelectorAll('.lab-link-box, #triage-share');
      for (const box of boxes) {
        const field = box.querySelector('textarea, input');
        if (field && field.value && onScreen(box)) { window.labSetUrl(box.id, field.value); return; }
      }
    }, 120);
  };
  window.addEventListener('popstate', function () { window.location.reload(); });
})();
