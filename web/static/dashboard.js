// Blanket dashboard: keeps the projected page live from GET /events. A
// "round" event updates the figures and swaps in the small chart block
// (GET /fragments/charts; the heatmaps are images that change URL with the
// round); the privacy comparison (GET /fragments/privacy) is fetched only
// while its section is open. A dropped stream shows the "disconnected"
// banner until it is back. The volunteers connected now and the open
// round's deadline come from the relay's GET /api/round.
(() => {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const fmt = (v) => String(parseFloat(Number(v).toPrecision(4)));
  function set(id, value, text) {
    const e = $(id);
    if (!e) return;
    e.dataset.value = String(value);
    e.textContent = text;
  }

  // swap fetches a fragment and replaces the element with the same id,
  // one request at a time per fragment (a request during one is queued).
  function swapper(url, id) {
    let busy = false, again = false;
    return function swap() {
      if (busy) { again = true; return; }
      busy = true;
      fetch(url, { cache: "no-store" }).then((r) => {
        if (!r.ok) throw new Error(`HTTP ${r.status}`);
        return r.text();
      }).then((html) => {
        const t = document.createElement("template");
        t.innerHTML = html.trim();
        const next = t.content.firstElementChild, cur = $(id);
        if (next && cur && next.id === id) cur.replaceWith(next);
      }).catch(() => {}).finally(() => {
        busy = false;
        if (again) { again = false; swap(); }
      });
    };
  }
  const refreshCharts = swapper("/fragments/charts", "charts");
  const refreshPrivacy = swapper("/fragments/privacy", "privacy");
  const details = $("privacy-details");
  function privacyStale(round) {
    const p = $("privacy");
    return p && p.dataset.round !== String(round);
  }
  details.addEventListener("toggle", () => {
    if (details.open && privacyStale($("round").dataset.value)) refreshPrivacy();
  });

  const words = { running: "training", paused: "paused by the teacher", stopped: "finished" };
  function accuracy(v) {
    if (v !== null && v !== undefined) set("accuracy", v, (100 * v).toFixed(1) + " %");
  }
  function epsilon(v) {
    if (v === null || v === undefined) return;
    set("epsilon", v, fmt(v));
    const target = Number($("target").dataset.value);
    if (target > 0) $("privacy-meter").value = Math.min(1, Math.max(0, v / target));
  }
  // roundNote says why the latest round was cancelled and what to do
  // (the aggregator's last_abort, in words), or nothing once a round
  // updated the model again.
  function roundNote(a) {
    const el = $("round-note");
    if (!el) return;
    el.hidden = !a;
    el.dataset.round = a ? String(a.round) : "";
    el.textContent = a ? a.message : "";
    if (a && a.advice) {
      const b = document.createElement("strong");
      b.className = "advice";
      b.textContent = "What to do: " + a.advice;
      el.append(" ", b);
    }
  }
  let deadline = 0, openRound = 0, waiting = "";
  function countdown() {
    const el = $("countdown");
    if (!openRound || !deadline) { el.textContent = ""; return; }
    if (waiting) { el.textContent = ` · round ${openRound} ${waiting}`; return; }
    const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
    el.textContent = left > 0 ? ` · round ${openRound} closes in ${left} s` : ` · round ${openRound} closing`;
  }
  setInterval(countdown, 1000);

  let connected = true;
  function showConnected(on) {
    connected = on;
    $("disconnected").hidden = on;
    const st = $("state");
    if (!on) {
      st.dataset.state = "disconnected";
      st.textContent = "disconnected";
    }
  }

  if (window.EventSource) {
    const es = new EventSource("/events");
    es.addEventListener("open", () => showConnected(true));
    es.addEventListener("error", () => showConnected(false));
    es.addEventListener("round", (ev) => {
      const r = JSON.parse(ev.data);
      set("round", r.round, String(r.round));
      accuracy(r.accuracy);
      epsilon(r.epsilon_tightest);
      refreshCharts();
      if (details.open) refreshPrivacy();
      loadModel();
    });
    es.addEventListener("status", (ev) => {
      const s = JSON.parse(ev.data), charts = $("charts");
      showConnected(true);
      // A new class of another task (chosen on the operator page): the
      // page's layout is the old task's, so load it again.
      const head = document.querySelector(".dash-head");
      if (head && (s.task || "") !== (head.dataset.task || "")) { location.reload(); return; }
      set("round", s.round, String(s.round));
      accuracy(s.accuracy);
      epsilon(s.epsilon);
      const m = $("epsilon-method");
      if (m && s.method) m.textContent = s.method;
      const st = $("state"), v = s.stopped ? "stopped" : (s.paused ? "paused" : "running");
      st.dataset.state = v;
      // Paused before the first round: waiting to start (dashStateWords).
      st.textContent = (v === "paused" && !s.round ? "waiting to start" : words[v]) + (s.stopped ? ": " + s.stopped : "");
      roundNote(s.last_abort);
      openRound = s.open_round || 0;
      deadline = s.deadline ? Date.parse(s.deadline) : 0;
      waiting = s.waiting || "";
      countdown();
      if (charts && (charts.dataset.round !== String(s.round) || charts.dataset.resets !== String(s.model_resets || 0))) {
        refreshCharts();
        if (details.open && privacyStale(s.round)) refreshPrivacy();
        loadModel();
      }
    });
  }

  // Volunteers connected now, from the relay (another origin: it answers
  // with Access-Control-Allow-Origin).
  const vol = $("volunteers"), roundURL = vol.dataset.url;
  async function volunteers() {
    try {
      const r = await fetch(roundURL, { cache: "no-store", mode: "cors" });
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      const info = await r.json();
      set("volunteers", info.volunteers, String(info.volunteers));
      const sim = Number(vol.dataset.simulated) || 0, split = $("volunteers-split");
      if (split) {
        const real = Math.max(0, info.volunteers - sim);
        split.textContent = ` (${real} real, ${Math.min(sim, info.volunteers)} simulated)`;
      }
    } catch {
      set("volunteers", "", "unknown (relay not reachable)");
    }
  }
  if (roundURL) {
    volunteers();
    setInterval(volunteers, 3000);
  }

  // ---- the try form of a tabular study: enter values, see the prediction ----
  // The model and its task come from GET /api/export; a row is encoded as
  // shared/task encodes it (min-max by the declared range, [-1, 1] for a
  // "symmetric" scale, one-hot by the declared categories, all zero for "no
  // answer"), then the class
  // with the largest logit Σ_j w_cj·x_j + b_c is the prediction.
  const tryForm = $("try-form");
  let model = null;
  function encode(t, form) {
    const x = [];
    for (const f of t.features) {
      const el = form.elements.namedItem(f.name);
      if (!el) throw new Error(`no field for ${f.name}`);
      if (f.type === "categorical") {
        // "no answer" (the form's neutral start): every indicator 0, so
        // the question adds nothing to any class's score.
        if (el.value === "") { f.categories.forEach(() => x.push(0)); continue; }
        const j = f.categories.indexOf(el.value);
        if (j < 0) throw new Error(`${f.question || f.name}: pick one of the choices`);
        f.categories.forEach((_, k) => x.push(k === j ? 1 : 0));
        continue;
      }
      const v = el.value.trim() === "" ? NaN : Number(el.value);
      if (!Number.isFinite(v)) throw new Error(`${f.question || f.name}: enter a number`);
      if (v < f.min || v > f.max) throw new Error(`${f.question || f.name}: ${v} is outside ${f.min} to ${f.max}`);
      let u = (v - f.min) / (f.max - f.min);
      if (f.scale === "symmetric") u = 2 * u - 1;
      x.push(u);
    }
    return x;
  }
  function predict() {
    const out = $("try-result");
    if (!tryForm || !out) return;
    if (!model) { out.textContent = "The model is not available yet."; return; }
    let x;
    try {
      x = encode(model.task, tryForm);
    } catch (e) {
      out.dataset.class = "";
      out.textContent = e.message;
      return;
    }
    const F = model.inputs.length, classes = model.task.label.classes;
    const logits = classes.map((_, c) => x.reduce((s, v, j) => s + v * model.weights[c * F + j], model.bias[c]));
    const top = Math.max(...logits), exp = logits.map((l) => Math.exp(l - top)), sum = exp.reduce((a, b) => a + b, 0);
    let best = 0;
    logits.forEach((l, c) => { if (l > logits[best]) best = c; });
    out.dataset.class = classes[best];
    out.dataset.round = String(model.round);
    const untrained = logits.every((l) => l === logits[0]);
    out.textContent = untrained ? "The model has not learned anything yet (no round has updated it)." :
      `Prediction: ${classes[best]} (${(100 * exp[best] / sum).toFixed(0)} % by the model after round ${model.round})`;
  }
  async function loadModel() {
    if (!tryForm) return;
    try {
      const r = await fetch(tryForm.dataset.export, { cache: "no-store" });
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      model = await r.json();
    } catch { /* keep the last model */ }
    predict();
  }
  if (tryForm) {
    tryForm.addEventListener("input", predict);
    tryForm.addEventListener("change", predict);
    tryForm.addEventListener("submit", (e) => { e.preventDefault(); predict(); });
    loadModel();
  }
})();
