// Blanket operator page: confirms destructive actions, fills in a
// protocol's defaults when the protocol changes, and keeps the state line
// live from GET /events (the same stream as the dashboard).
(() => {
  "use strict";
  const $ = (id) => document.getElementById(id);

  for (const f of document.querySelectorAll("form[data-confirm]")) {
    f.addEventListener("submit", (ev) => {
      if (!window.confirm(f.dataset.confirm)) ev.preventDefault();
    });
  }

  const proto = $("op-protocol");
  if (proto) {
    proto.addEventListener("change", () => {
      const d = document.querySelector(`template.op-defaults[data-protocol="${proto.value}"]`);
      if (!d) return;
      $("op-k").value = d.dataset.k;
      $("op-beta").value = "";
      $("op-np-ratio").value = d.dataset.npRatio;
      $("op-server-lr").value = d.dataset.serverLr;
    });
  }

  const words = { running: "training", paused: "paused by the teacher", stopped: "finished" };
  const stateEl = $("op-state"), roundEl = $("op-round"), openEl = $("op-open");
  let deadline = Number(openEl.dataset.deadline) || 0, openRound = Number(openEl.dataset.round) || 0;
  function showOpen() {
    if (!openRound) { openEl.textContent = ""; return; }
    const left = deadline ? Math.max(0, Math.round((deadline - Date.now()) / 1000)) : 0;
    openEl.textContent = `· round ${openRound} open` + (deadline ? (left > 0 ? ` (closes in ${left} s)` : " (closing)") : "");
  }
  setInterval(showOpen, 1000);
  showOpen();
  if (typeof EventSource !== "function") return;
  const es = new EventSource("/events");
  es.addEventListener("status", (ev) => {
    let st;
    try { st = JSON.parse(ev.data); } catch { return; }
    const state = st.stopped ? "stopped" : st.paused ? "paused" : "running";
    stateEl.dataset.state = state;
    stateEl.textContent = words[state];
    roundEl.dataset.value = st.round;
    roundEl.textContent = String(st.round);
    openRound = st.open_round || 0;
    deadline = st.deadline ? Date.parse(st.deadline) : 0;
    showOpen();
  });
  es.addEventListener("error", () => {
    stateEl.textContent = "disconnected from the aggregator (reconnecting…)";
    stateEl.dataset.state = "disconnected";
  });
})();
