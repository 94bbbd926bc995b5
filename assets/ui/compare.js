// Compare tab, loaded into the page <head> by lab/ui/app.py.
// Keyboard shortcuts: j / → next step, k / ← previous step (ignored while typing in a field).
document.addEventListener('keydown', function (e) {
  const t = e.target;
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.isContentEditable)) return;
  const map = {'j': 'lab-next', 'ArrowRight': 'lab-next', 'k': 'lab-prev', 'ArrowLeft': 'lab-prev'};
  const id = map[e.key];
  if (!id) return;
  const btn = document.getElementById(id);
  if (btn && btn.offsetParent !== null) { e.preventDefault(); btn.click(); }
});
// Prompt audit panels are computed on first opening: ask the server through hidden components.
document.addEventListener('toggle', function (e) {
  const d = e.target;
  if (!(d instanceof HTMLDetailsElement) || !d.open || !d.classList.contains('lab-audit')) return;
  if (d.dataset.audit !== 'pending' && d.dataset.audit !== 'loading') return;  // reopening retries
  const box = document.querySelector('#lab-audit-request textarea, #lab-audit-request input');
  const go = document.getElementById('lab-audit-go');
  if (!box || !go) return;
  d.dataset.audit = 'loading';
  box.value = JSON.stringify([d.dataset.auditEngine, d.dataset.auditStep]);
  box.dispatchEvent(new Event('input', {bubbles: true}));
  setTimeout(function () { go.click(); }, 0);
}, true);
