"use strict";
(function () {
  const t0 = performance.now();
  const ROW = 24;
  let view = JSON.parse(document.getElementById("view-data").textContent);
  const state = { agent: 0, step: -1, filter: "all", agentFilter: "", collapsed: new Set() };

  // el builds an element; strings become text, never markup.
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      const v = attrs[k];
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "style") Object.assign(e.style, v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of kids.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  const fmtInt = (n) => (n || 0).toLocaleString("en-US");
  const fmtUSD = (m) => (m && !m.known ? (m.usd ? "≥$" + m.usd.toFixed(4) : "unknown") : "$" + (m ? m.usd : 0).toFixed(4));
  const fmtMS = (ms) => (ms < 1000 ? ms + "ms" : ms < 60000 ? (ms / 1000).toFixed(1) + "s" : Math.floor(ms / 60000) + "m" + Math.round((ms % 60000) / 1000) + "s");
  function outcomeClass(a) {
    if (a.status === "running") return "run";
    if (a.outcome === "success" || a.outcome === "finished") return "good";
    if (a.outcome === "awaiting_approval") return "wait";
    return "bad";
  }
  function agentEnd(a) {
    let end = a.finished || a.started;
    const st = a.step_list || [];
    if (st.length) end = Math.max(end, st[st.length - 1].end);
    if (!a.finished && view.live) end = Math.max(end, Date.now());
    return Math.max(end, a.started + 1);
  }

  // VirtualList draws only the rows the scroller shows.
  class VirtualList {
    constructor(scroller, draw) {
      this.scroller = scroller;
      this.draw = draw;
      this.count = 0;
      this.spacer = el("div", { class: "spacer" });
      scroller.replaceChildren(this.spacer);
      let pending = false;
      scroller.addEventListener("scroll", () => {
        if (pending) return;
        pending = true;
        requestAnimationFrame(() => { pending = false; this.paint(); });
      });
      new ResizeObserver(() => this.paint()).observe(scroller);
    }
    set(count) { this.count = count; this.spacer.style.height = count * ROW + "px"; this.paint(); }
    paint() {
      const top = this.scroller.scrollTop, h = this.scroller.clientHeight || 600;
      const from = Math.max(0, Math.floor(top / ROW) - 10), to = Math.min(this.count, Math.ceil((top + h) / ROW) + 10);
      const rows = [];
      for (let i = from; i < to; i++) {
        const r = this.draw(i);
        r.style.top = i * ROW + "px";
        rows.push(r);
      }
      this.spacer.replaceChildren(...rows);
    }
    reveal(i) {
      const s = this.scroller, y = i * ROW;
      if (y < s.scrollTop || y + ROW > s.scrollTop + s.clientHeight) s.scrollTop = Math.max(0, y - s.clientHeight / 3);
      this.paint();
    }
  }

  // Agents.
  let visibleAgents = [];
  function treeSpan() {
    let from = Infinity, to = 0;
    for (const a of view.agents) { from = Math.min(from, a.started); to = Math.max(to, agentEnd(a)); }
    return [from, Math.max(to, from + 1)];
  }
  function computeVisibleAgents() {
    const f = state.agentFilter.toLowerCase();
    const hidden = new Set();
    visibleAgents = [];
    view.agents.forEach((a, i) => {
      if (a.parent >= 0 && (hidden.has(a.parent) || state.collapsed.has(a.parent))) { hidden.add(i); return; }
      if (f && !(a.path.toLowerCase().includes(f) || (a.outcome || a.status).includes(f) || a.id.includes(f))) return;
      visibleAgents.push(i);
    });
  }
  const hasKids = new Set();
  function indexKids() { hasKids.clear(); for (const a of view.agents) if (a.parent >= 0) hasKids.add(a.parent); }
  let agentList;
  function drawAgent(k) {
    const i = visibleAgents[k], a = view.agents[i];
    const [from, to] = treeSpan();
    const span = to - from;
    const twisty = hasKids.has(i) ? (state.collapsed.has(i) ? "▸" : "▾") : "";
    const row = el("div", { class: "row agent-row" + (i === state.agent ? " sel" : ""), "data-agent": a.id, title: a.id + "\n" + (a.goal || ""),
      onclick: (ev) => {
        if (ev.target.classList.contains("twisty") && hasKids.has(i)) {
          state.collapsed.has(i) ? state.collapsed.delete(i) : state.collapsed.add(i);
          computeVisibleAgents(); agentList.set(visibleAgents.length); return;
        }
        selectAgent(i);
      } },
      el("span", { class: "path", style: { paddingLeft: Math.min(a.depth, 12) * 12 + "px" } },
        el("span", { class: "twisty" }, twisty), el("span", { class: "dot " + outcomeClass(a) }), a.path.split("/").pop() || a.path),
      el("span", { class: "agent-bar", title: new Date(a.started).toISOString() + " · " + fmtMS(agentEnd(a) - a.started) },
        el("i", { style: { left: Math.min(98, ((a.started - from) / span) * 100) + "%", width: ((agentEnd(a) - a.started) / span) * 100 + "%" } })),
      el("span", { class: "num" }, fmtInt(a.steps) + " st"),
      el("span", { class: "num" }, fmtUSD(a.cost)));
    return row;
  }

  // Steps.
  let shownSteps = [];
  function stepMatches(s) {
    switch (state.filter) {
      case "refusals": return (s.tools || []).some((t) => t.outcome === "refused") || (s.verdicts || []).some((v) => v.effect === "deny");
      case "errors": return (s.tools || []).some((t) => t.outcome === "error");
      case "retries": return (s.attempts || []).length > 0;
      case "approvals": return (s.approvals || []).length > 0;
      case "writes": return (s.tools || []).some((t) => t.write);
      case "gate": return s.gate && !s.gate.passed;
    }
    return true;
  }
  function computeSteps() {
    const a = view.agents[state.agent];
    shownSteps = [];
    (a.step_list || []).forEach((s, i) => { if (stepMatches(s)) shownSteps.push(i); });
  }
  let stepList;
  function drawStep(k) {
    const a = view.agents[state.agent], i = shownSteps[k], s = a.step_list[i];
    const from = a.started, span = agentEnd(a) - from;
    const dur = Math.max(1, s.end - s.start);
    const segs = [];
    if (s.model) segs.push(el("i", { class: "m", style: { left: ((s.model.start - s.start) / dur) * 100 + "%", width: (s.model.latency_ms / dur) * 100 + "%" } }));
    for (const t of s.tools || []) {
      if (!t.start) continue;
      const bad = t.outcome === "refused" || t.outcome === "error";
      segs.push(el("i", { class: "t" + (bad ? " bad" : ""), style: { left: ((t.start - s.start) / dur) * 100 + "%", width: (Math.max(0, t.end - t.start) / dur) * 100 + "%" } }));
    }
    if (s.gate) {
      const g = (s.gate.checks || []).reduce((n, c) => n + c.duration_ms, 0);
      segs.push(el("i", { class: "g" + (s.gate.passed ? "" : " bad"), style: { left: ((s.end - g - s.start) / dur) * 100 + "%", width: (g / dur) * 100 + "%" } }));
    }
    const marks = [];
    if ((s.attempts || []).length) marks.push(el("span", { class: "mark retry" }, (s.attempts || []).some((x) => x.fallback) ? "fallback" : "retry"));
    if ((s.approvals || []).length) marks.push(el("span", { class: "mark ask" }, "approval"));
    if (s.gate) marks.push(el("span", { class: "mark " + (s.gate.passed ? "gateok" : "gatefail") }, s.gate.passed ? "gate ✓" : "gate ✗"));
    return el("div", { class: "row step-row" + (i === state.step ? " sel" : ""), "data-step": s.n, onclick: () => selectStep(i) },
      el("span", {}, "#" + s.n),
      el("span", { class: "marks" }, marks),
      el("span", { class: "pos", title: new Date(s.start).toISOString() }, el("i", { style: { left: Math.min(97, ((s.start - from) / span) * 100) + "%", width: (dur / span) * 100 + "%" } })),
      el("span", { class: "anat", title: fmtMS(dur) }, segs),
      el("span", { class: "chips" }, (s.tools || []).map((t) => el("span", { class: "chip " + t.outcome, title: t.outcome + (t.refusal ? ": " + t.refusal : "") }, t.name))),
      el("span", { class: "num step-tokens", "data-in": s.usage.in, "data-out": s.usage.out }, fmtInt(s.usage.in + s.usage.out)),
      el("span", { class: "num step-cost", "data-usd": s.cost.usd }, fmtUSD(s.cost)));
  }

  // Detail.
  function pre(text, cls) { return el("pre", { class: cls }, text); }
  function diffPre(text) {
    return el("pre", { class: "diff" }, text.split("\n").map((l) =>
      el("span", { class: l.startsWith("+") && !l.startsWith("+++") ? "add" : l.startsWith("-") && !l.startsWith("---") ? "del" : l.startsWith("@@") ? "hunk" : "" }, l + "\n")));
  }
  function verdictLine(v) {
    return el("span", { class: "verdict " + v.effect }, v.effect + " " + v.act + " " + v.target + (v.rule ? "  (rule " + v.rule + " in " + v.layer + ")" : "  (default)"));
  }
  function renderDetail() {
    const body = document.getElementById("detail-body");
    const a = view.agents[state.agent];
    const s = (a.step_list || [])[state.step];
    const title = document.getElementById("detail-title");
    if (!s) {
      title.textContent = "select a step";
      const kids = [el("div", { class: "empty" }, "Select a step to see the model's words, its tool calls, the policy's verdicts, approvals, the gate's output and the diff of every write.")];
      if ((a.unstepped || []).length) {
        kids.push(el("h3", {}, "provider calls of no committed step"));
        for (const x of a.unstepped) kids.push(pre("step " + x.step + " call " + x.attempt + " to " + x.provider + ": " + x.error_kind + " " + (x.error || "")));
      }
      if ((a.approvals || []).length) {
        kids.push(el("h3", {}, "approval requests"));
        for (const ap of a.approvals) kids.push(el("div", { class: "tool" }, el("div", { class: "head" }, el("b", {}, ap.id), el("span", { class: "kv" }, "step " + ap.step + " · " + ap.tool + " " + ap.act + " " + ap.target + " · " + ap.state + (ap.decision ? " · " + ap.decision : ""))), ap.shown ? diffPre(ap.shown) : null));
      }
      body.replaceChildren(...kids.filter(Boolean));
      return;
    }
    title.textContent = a.path + " · step " + s.n;
    const kids = [el("div", { class: "kv" }, fmtMS(s.end - s.start) + " · " + s.provider + " · " + fmtInt(s.usage.in) + " in / " + fmtInt(s.usage.out) + " out" +
      (s.usage.cache_read ? " (" + fmtInt(s.usage.cache_read) + " cached)" : "") + " · " + fmtUSD(s.cost) + " · run total " + fmtInt(s.total.usage.in + s.total.usage.out) + " tokens, " + fmtUSD(s.total.cost))];
    if (s.model) kids.push(el("div", { class: "kv" }, "model call " + fmtMS(s.model.latency_ms) + (s.model.first_token_ms ? ", first token after " + fmtMS(s.model.first_token_ms) : "") + (s.model.model ? " · " + s.model.model : "") + (s.model.stop_reason ? " · stop: " + s.model.stop_reason : "")));
    if ((s.attempts || []).length) {
      kids.push(el("h3", {}, "retries and fallbacks"));
      for (const x of s.attempts) kids.push(pre(x.fallback ? "fell back to " + x.provider : "call " + x.attempt + " to " + x.provider + " failed (" + x.error_kind + ")" + (x.wait_ms ? ", retried after " + fmtMS(x.wait_ms) : "") + ": " + (x.error || "")));
    }
    if (s.text) { kids.push(el("h3", {}, "model")); kids.push(pre(s.text)); }
    if ((s.tools || []).length) kids.push(el("h3", {}, "tool calls"));
    for (const t of s.tools || []) {
      const box = el("div", { class: "tool", "data-call": t.call_id },
        el("div", { class: "head" }, el("b", {}, t.name), el("span", { class: "chip " + t.outcome }, t.outcome), t.start ? el("span", { class: "kv" }, fmtMS(Math.max(0, t.end - t.start))) : null),
        t.arguments ? pre(t.arguments) : null,
        (t.verdicts || []).map(verdictLine),
        t.refusal ? el("div", { class: "verdict deny" }, "refused: " + t.refusal) : null);
      if (t.diff) { box.append(el("div", { class: "kv" }, "diff of " + t.write + (t.diff_note ? " — " + t.diff_note : ""))); box.append(diffPre(t.diff)); }
      if (t.output) box.append(pre(t.output));
      kids.push(box);
    }
    if ((s.verdicts || []).length) { kids.push(el("h3", {}, "other policy verdicts")); kids.push(...s.verdicts.map(verdictLine)); }
    if ((s.approvals || []).length) {
      kids.push(el("h3", {}, "approvals"));
      for (const d of s.approvals) kids.push(el("div", { class: "kv" }, d.request_id + " " + d.event + (d.tool ? " · " + d.tool : "") + (d.target ? " " + d.act + " " + d.target : "") + (d.decision ? " · " + d.decision : "") + (d.reason ? " — " + d.reason : "")));
      for (const ap of a.approvals || []) if (ap.step === s.n && ap.shown) { kids.push(el("div", { class: "kv" }, "shown to the person for " + ap.id + " (" + ap.state + ")")); kids.push(diffPre(ap.shown)); }
    }
    if (s.gate) {
      kids.push(el("h3", {}, "gate " + (s.gate.passed ? "passed" : "not passed")));
      for (const c of s.gate.checks || []) {
        kids.push(el("div", { class: "verdict " + (c.passed ? "allow" : "deny") }, (c.passed ? "✓ " : "✗ ") + c.kind + (c.file ? " " + c.file : "") + " — " + c.detail + (c.backend ? " (" + c.backend + ", " + fmtMS(c.duration_ms) + ")" : "")));
        if (c.output) kids.push(pre(c.output));
      }
      if (s.gate.text) kids.push(pre(s.gate.text));
    }
    if ((s.notes || []).length) { kids.push(el("h3", {}, "notes")); for (const n of s.notes) kids.push(pre(n.kind + ": " + n.text)); }
    body.replaceChildren(...kids.flat().filter(Boolean));
    body.scrollTop = 0;
  }

  function selectAgent(i) {
    state.agent = i; state.step = -1;
    const a = view.agents[i];
    document.getElementById("agent-title").textContent = a.path + " · " + (a.outcome || a.status) + " · " + fmtInt(a.steps) + " steps";
    computeSteps();
    stepList.set(shownSteps.length);
    stepList.scroller.scrollTop = 0;
    agentList.paint();
    renderDetail();
  }
  function selectStep(i) {
    state.step = i;
    stepList.paint();
    renderDetail();
  }

  function render() {
    indexKids();
    computeVisibleAgents();
    agentList.set(visibleAgents.length);
    if (state.agent >= view.agents.length) state.agent = 0;
    computeSteps();
    stepList.set(shownSteps.length);
    const a = view.agents[state.agent];
    document.getElementById("agent-title").textContent = a.path + " · " + (a.outcome || a.status) + " · " + fmtInt(a.steps) + " steps";
    renderDetail();
  }

  agentList = new VirtualList(document.getElementById("agent-list"), drawAgent);
  stepList = new VirtualList(document.getElementById("step-list"), drawStep);
  document.getElementById("agent-filter").addEventListener("input", (e) => { state.agentFilter = e.target.value; computeVisibleAgents(); agentList.set(visibleAgents.length); });
  for (const r of document.querySelectorAll("#step-filters input")) r.addEventListener("change", (e) => { state.filter = e.target.value; state.step = -1; computeSteps(); stepList.set(shownSteps.length); renderDetail(); });
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT") return;
    const k = shownSteps.indexOf(state.step);
    if (e.key === "j" || e.key === "ArrowDown") { const n = shownSteps[Math.min(shownSteps.length - 1, k + 1)]; if (n !== undefined) { selectStep(n); stepList.reveal(shownSteps.indexOf(n)); e.preventDefault(); } }
    if (e.key === "k" || e.key === "ArrowUp") { const n = shownSteps[Math.max(0, k - 1)]; if (n !== undefined) { selectStep(n); stepList.reveal(shownSteps.indexOf(n)); e.preventDefault(); } }
  });
  render();
  // A link may name an agent and a step: #agent=RUN_ID&step=N. Without
  // one, the first step that wrote something is shown, else the last.
  (function () {
    const q = new URLSearchParams(location.hash.slice(1));
    const ai = view.agents.findIndex((a) => a.id === q.get("agent"));
    if (ai > 0) { selectAgent(ai); agentList.reveal(visibleAgents.indexOf(ai)); }
    const a = view.agents[state.agent], st = a.step_list || [];
    let i = st.findIndex((s) => String(s.n) === q.get("step"));
    if (i < 0 && !q.get("step")) i = st.findIndex((s) => (s.tools || []).some((t) => t.diff));
    if (i < 0) i = st.length - 1;
    if (i >= 0) { selectStep(i); stepList.reveal(shownSteps.indexOf(i)); }
  })();
  document.body.dataset.renderMs = String(Math.round(performance.now() - t0));
  document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.ready = "1";

  // A served page follows the store: it asks for a newer version of the
  // view every second while anything in it runs.
  if (view.live) {
    const badge = document.getElementById("live-state");
    let etag = view.version;
    async function poll() {
      try {
        const r = await fetch("../api/runs/" + encodeURIComponent(view.root) + "/view", { headers: { "If-None-Match": '"' + etag + '"' }, cache: "no-store" });
        if (r.status === 200) {
          const next = await r.json();
          etag = next.version;
          const sel = view.agents[state.agent] && view.agents[state.agent].id;
          next.live = true;
          view = next;
          const i = view.agents.findIndex((a) => a.id === sel);
          state.agent = i >= 0 ? i : 0;
          updateHeader();
          render();
        }
        if (badge) badge.className = "live";
      } catch (e) {
        if (badge) badge.className = "live stale";
      }
      const running = view.agents.some((a) => a.status !== "finished");
      setTimeout(poll, running ? 1000 : 5000);
    }
    setTimeout(poll, 1000);
  }
  function updateHeader() {
    const r = view.agents[0];
    const set = (id, v, text) => { const e = document.getElementById(id); if (e) { e.dataset.value = String(v); e.textContent = text; } };
    set("sum-steps", r.steps, String(r.steps));
    set("sum-tokens-in", r.usage.in, fmtInt(r.usage.in));
    set("sum-tokens-out", r.usage.out, fmtInt(r.usage.out));
    set("sum-cost", r.cost.usd.toFixed(6), fmtUSD(r.cost));
    const o = document.getElementById("sum-outcome");
    const kind = r.outcome || r.status;
    o.dataset.value = kind; o.textContent = kind; o.className = "outcome " + outcomeClass(r);
  }
})();
