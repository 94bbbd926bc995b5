(answer) => {
  if (!answer) return;
  const [engine, step, state, summary, body] = JSON.parse(answer);
  document.querySelectorAll('details.lab-audit').forEach(function (d) {
    if (d.dataset.auditEngine !== engine || d.dataset.auditStep !== step) return;
    d.querySelector('summary').innerHTML = summary;
    d.querySelector('.lab-audit-body').innerHTML = body;
    d.dataset.audit = state;
  });
}
