"use strict";
(function () {
  // The list follows the store: it is asked for again every two seconds.
  const badge = document.getElementById("live-state");
  function cell(text, cls) { const td = document.createElement("td"); if (cls) td.className = cls; td.textContent = text; return td; }
  function link(id) { const a = document.createElement("a"); a.href = "runs/" + encodeURIComponent(id); a.textContent = id; return a; }
  async function poll() {
    try {
      const r = await fetch("api/runs", { cache: "no-store" });
      const runs = await r.json();
      const rows = runs.map((x) => {
        const tr = document.createElement("tr");
        tr.dataset.run = x.id;
        const first = document.createElement("td");
        first.append(link(x.id));
        if (x.parent_id) { const s = document.createElement("span"); s.className = "kv"; s.append(" ← ", link(x.parent_id)); first.append(s); }
        tr.append(first, cell(x.path), cell(x.status), cell(x.outcome), cell(x.steps, "num"), cell(x.tokens, "num"), cell(x.cost, "num"), cell(x.started));
        return tr;
      });
      if (rows.length) document.getElementById("runs").replaceChildren(...rows);
      badge.className = "live";
    } catch (e) {
      badge.className = "live stale";
    }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 2000);
  document.body.dataset.ready = "1";
})();
