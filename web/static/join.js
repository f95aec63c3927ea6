// Blanket join page: loads the wasm client (wasm_exec.js + /blanket.wasm)
// and wires the page to its JavaScript API (docs/web.md). No framework.
// The drawings and the shard seed stay in this page and the wasm client:
// only the client's randomized, sealed messages go to the relay.
(() => {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const form = $("join-form"), startBtn = $("start"), stopBtn = $("stop");
  const statusEl = $("status"), progressEl = $("progress"), sentEl = $("sent");
  const epsEl = $("my-epsilon"), roundsEl = $("rounds-joined"), fpEl = $("fingerprint");
  const infoEl = $("round-info"), progressLabel = $("progress-label");
  const errBox = $("error-details"), errTextEl = $("error-text");
  const hasWasm = $("join-script").dataset.wasm === "true";

  let api = null;          // globalThis.blanket once ready
  let running = false;
  const drawn = [];        // drawings not yet handed to the client: {pixels, label}
  let given = 0;           // drawings handed to the client (cannot be undone)
  const totals = { messages: 0, bytes: 0 };

  const errText = (e) => (e && e.message) || String(e);
  // friendly turns a Go or browser error into words for a student; the
  // original stays under "Technical details".
  function friendly(raw) {
    const e = String(raw || "");
    const rules = [
      [/fingerprint|pinned/i, "The teacher's key does not match the one this server gives out. Do not join; tell the teacher."],
      [/no local data|no drawings/i, "Add at least one drawing first, or choose the sample digits."],
      [/budget|exhaust/i, "The class has used up its privacy budget, so training is over. Thank you for taking part!"],
      [/too late|no open round|wrong round|not invited/i, "This round closed before your update arrived. You will take part in the next one."],
      [/stale|old round/i, "Your device missed a round. Waiting for the next one."],
      [/websocket|dial|connect|closed|network|fetch|refused|timeout|HTTP 5/i,
        "Cannot reach the class server. Check that this device is on the same Wi-Fi as the teacher's laptop, then press Start again."],
    ];
    for (const [re, text] of rules) if (re.test(e)) return text;
    return "Something went wrong. Press Start to try again; if it keeps happening, tell the teacher.";
  }
  function setStatus(state, text, raw) {
    statusEl.dataset.state = state;
    statusEl.textContent = text;
    errBox.hidden = !raw;
    errTextEl.textContent = raw ? String(raw) : "";
  }
  function setError(prefix, raw) {
    setStatus("error", prefix + friendly(raw), raw || "");
  }
  function setRunning(on) {
    running = on;
    startBtn.disabled = on || !api;
    stopBtn.disabled = !on;
    for (const el of form.querySelectorAll("input[name=source], #eps-level")) el.disabled = on;
    if (on) pollRound();
  }

  // ---- the round as the relay sees it: countdown, pause, progress ----
  // Between rounds the progress bar shows how much of the open round's
  // time has passed (its deadline from GET /api/round); while training, how
  // far training got.
  const round = { open: 0, deadline: 0, start: 0, paused: false, stopped: "", skew: 0, timer: 0 };
  function phase() { return statusEl.dataset.state; }
  function showRound() {
    const now = Date.now() + round.skew;
    let text = "", state = "";
    if (round.stopped) {
      text = "Training is over for this class. Thank you for taking part!";
      state = "stopped";
    } else if (round.paused && !round.open) {
      text = "Paused by the teacher. Training continues when they press Start.";
      state = "paused";
    } else if (round.open && round.deadline) {
      const left = Math.max(0, Math.ceil((round.deadline - now) / 1000));
      text = (left > 0 ? `Round ${round.open} is open: it closes in ${left} s.` : `Round ${round.open} is closing: the server is adding up the updates.`) +
        (round.paused ? " The teacher paused training after this round." : "");
      state = "open";
    } else if (running) {
      text = "The next round starts in a moment.";
      state = "between";
    }
    infoEl.textContent = text;
    infoEl.dataset.state = state;
    const p = phase();
    if (p === "training") {
      progressLabel.textContent = "Training on your data";
    } else if (p === "sent") {
      progressLabel.textContent = "Your update for this round was sent";
      progressEl.value = 1;
    } else if (running && round.open && round.deadline && round.start) {
      progressLabel.textContent = `Time passed in round ${round.open}`;
      progressEl.value = Math.min(1, Math.max(0, (now - round.start) / Math.max(1, round.deadline - round.start)));
    } else {
      progressLabel.textContent = round.paused ? "Waiting for the teacher to start the next round" : "Waiting for a round";
      progressEl.value = 0;
    }
  }
  async function pollRound() {
    clearTimeout(round.timer);
    try {
      const r = await fetch("/api/round", { cache: "no-store" });
      if (r.ok) {
        const info = await r.json();
        if (info.now) round.skew = Date.parse(info.now) - Date.now();
        const dl = info.deadline ? Date.parse(info.deadline) : 0;
        if (info.open_round !== round.open) round.start = info.open_round ? Date.now() + round.skew : 0;
        round.open = info.reachable ? info.open_round : 0;
        round.deadline = dl;
        round.paused = !!info.paused;
        round.stopped = info.stopped || "";
      }
    } catch { /* the status line says so when the connection drops */ }
    showRound();
    round.timer = setTimeout(pollRound, running ? 2000 : 10000);
  }
  setInterval(showRound, 1000);

  // ---- the wasm client ----
  async function load() {
    if (!hasWasm) return; // the page already says why
    if (typeof Go !== "function") {
      setStatus("error", "The page could not load wasm_exec.js; reload to try again.");
      return;
    }
    const go = new Go();
    const ready = new Promise((resolve) => {
      const done = () => resolve();
      globalThis.addEventListener("blanket-ready", done, { once: true });
      document.addEventListener("blanket-ready", done, { once: true });
    });
    let result;
    try {
      result = await WebAssembly.instantiateStreaming(fetch("/blanket.wasm"), go.importObject);
    } catch (streamErr) {
      // e.g. a proxy that changed the MIME type: compile from the bytes.
      const resp = await fetch("/blanket.wasm");
      if (!resp.ok) throw new Error(`HTTP ${resp.status} for /blanket.wasm`);
      result = await WebAssembly.instantiate(await resp.arrayBuffer(), go.importObject);
    }
    go.run(result.instance).then(() => {
      api = null;
      setRunning(false);
      startBtn.disabled = true;
      setStatus("error", "The Blanket client stopped; reload the page to join again.");
    });
    if (!globalThis.blanket) await ready;
    api = globalThis.blanket;
    setRunning(false);
    setStatus("idle", "Ready. Read the text above, make your choices, then press Start.");
    api.onEvent(onEvent); // after "Ready": the client may report at once
    pollRound();
  }

  function onEvent(e) {
    const round = e.round ? `Round ${e.round}: ` : "";
    if (e.round && e.kind === "announcement") pollRound();
    switch (e.kind) {
      case "connected":
        setStatus("waiting", "Connected to the relay. Waiting for the next round…");
        break;
      case "disconnected":
        setStatus("connecting", "Connection lost; reconnecting… (check that you are still on the class Wi-Fi)", e.error);
        break;
      case "announcement":
        progressEl.value = 0;
        setStatus("waiting", `${round}announced; checking in…`);
        break;
      case "sat-out":
        setStatus("waiting", `${round}sitting this one out (a random draw that is part of the privacy protection). Waiting for the next round…`);
        progressEl.value = 0;
        break;
      case "checked-in":
        progressEl.value = 0;
        setStatus("training", `${round}training on your data…`);
        break;
      case "training":
        progressEl.value = Math.min(1, Math.max(0, e.progress || 0));
        if (statusEl.dataset.state !== "training") setStatus("training", `${round}training on your data…`);
        break;
      case "sent":
        progressEl.value = 1;
        // messages and bytes are this round's; the page shows the totals.
        totals.messages += e.messages || 0;
        totals.bytes += e.bytes || 0;
        sentEl.dataset.messages = totals.messages;
        sentEl.dataset.bytes = totals.bytes;
        sentEl.textContent = `${totals.messages} messages, ${totals.bytes.toLocaleString()} bytes in all` +
          (e.noiseStd && e.messages !== 1 ? `; noise of standard deviation ${e.noiseStd.toPrecision(3)} on each value (last round)` : "");
        // One message a round is secure summation (two sealed secret
        // shares); many are a shuffle protocol's randomized values.
        setStatus("sent", e.messages === 1
          ? `${round}your update was sent as two sealed secret shares, one to each server. Waiting for the next round…`
          : `${round}your noisy, sealed update was sent. Waiting for the next round…`);
        break;
      case "privacy":
        if (Number.isFinite(e.epsilon)) {
          epsEl.dataset.value = e.epsilon;
          epsEl.textContent = `ε = ${e.epsilon.toPrecision(3)}`;
        }
        if (Number.isFinite(e.rounds)) {
          roundsEl.dataset.value = e.rounds;
          roundsEl.textContent = String(e.rounds);
        }
        break;
      case "ack":
        if (e.error) setError(round, e.error);
        break;
      case "rejected":
        setStatus("waiting", `${round}skipped: ${friendly(e.error)} Nothing was sent for it.`, e.error);
        break;
      case "failed":
        setError(`${round}nothing was sent. `, e.error);
        break;
      case "stopped":
        setRunning(false);
        setStatus("idle", "Stopped. Nothing more is sent.");
        break;
      case "error":
        setRunning(false);
        setError("", e.error);
        break;
      default:
        if (e.error) setError("", e.error);
    }
    showRound();
  }

  // The fingerprint the teacher's link carries ("#fp=…", from the
  // aggregator's dashboard and QR code): a URL fragment never reaches the
  // relay, so it is the pin the relay cannot change. The key the relay
  // serves must match it.
  const linkFp = new URLSearchParams(location.hash.slice(1)).get("fp") || "";

  async function keyFingerprint() {
    if (linkFp) {
      const served = await servedFingerprint();
      if (served && served !== linkFp) {
        throw new Error("pinned key fingerprint mismatch: the class link names " + linkFp + ", this server gives out " + served);
      }
      fpEl.dataset.value = linkFp;
      fpEl.textContent = linkFp + " (from the class link)";
      return linkFp;
    }
    return servedFingerprint();
  }

  async function servedFingerprint() {
    if (fpEl.dataset.value && !linkFp) return fpEl.dataset.value;
    try {
      const r = await fetch("/api/key", { cache: "no-store" });
      if (!r.ok) return "";
      const k = await r.json();
      if (k.fingerprint) {
        fpEl.dataset.value = k.fingerprint;
        fpEl.textContent = k.fingerprint;
      }
      return k.fingerprint || "";
    } catch {
      return "";
    }
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (!api || running) return;
    const source = form.querySelector("input[name=source]:checked").value;
    if (source === "drawings" && drawn.length + given === 0) {
      setStatus("error", "Add at least one drawing first, or choose the sample digits.");
      return;
    }
    let fingerprint;
    try {
      fingerprint = await keyFingerprint();
    } catch (e) {
      setError("", errText(e));
      return;
    }
    if (!fingerprint) {
      setStatus("error", "The class server is still starting. Try again in a moment.");
      return;
    }
    try {
      giveDrawings();
    } catch (e) {
      setError("Could not use your drawings. ", errText(e));
      return;
    }
    const shardSeed = crypto.getRandomValues(new Uint32Array(1))[0];
    setStatus("connecting", "Getting ready: preparing your data and connecting to the class server…");
    setRunning(true);
    progressEl.value = 0;
    $("live").scrollIntoView({ block: "nearest" });
    const relay = `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/ws`;
    try {
      await api.start({ relay, fingerprint, source, shardSeed, epsLevel: Number($("eps-level").value) || 0 });
    } catch (e) {
      setRunning(false);
      setError("Could not start. ", errText(e));
    }
  });

  stopBtn.addEventListener("click", () => {
    if (api) {
      try { api.stop(); } catch (e) { setStatus("error", errText(e)); }
    }
    setRunning(false);
    progressEl.value = 0;
    setStatus("idle", "Stopped. Nothing more is sent.");
    startBtn.focus();
  });

  // ---- drawing: pointer or keyboard on a 280x280 canvas, 28x28 out ----
  const cv = $("canvas"), view = cv.getContext("2d");
  const S = cv.width, N = 28, cell = S / N;
  const ink = document.createElement("canvas");
  ink.width = ink.height = S;
  const ic = ink.getContext("2d", { willReadFrequently: true });
  ic.lineCap = ic.lineJoin = "round";
  ic.lineWidth = 2.2 * cell;
  ic.strokeStyle = ic.fillStyle = "#000";
  const cursor = { x: 13, y: 13, pen: false, shown: false };

  function render() {
    view.clearRect(0, 0, S, S);
    view.drawImage(ink, 0, 0);
    if (cursor.shown) {
      view.strokeStyle = cursor.pen ? "#b42318" : "#0b5cad";
      view.lineWidth = 2;
      view.strokeRect(cursor.x * cell + 1, cursor.y * cell + 1, cell - 2, cell - 2);
    }
  }
  function dot(x, y) {
    ic.beginPath();
    ic.arc(x, y, ic.lineWidth / 2, 0, 2 * Math.PI);
    ic.fill();
  }
  function stroke(a, b) {
    ic.beginPath();
    ic.moveTo(a[0], a[1]);
    ic.lineTo(b[0], b[1]);
    ic.stroke();
  }
  function clearInk() {
    ic.clearRect(0, 0, S, S);
    render();
  }
  const pos = (ev) => {
    const r = cv.getBoundingClientRect();
    return [(ev.clientX - r.left) * S / r.width, (ev.clientY - r.top) * S / r.height];
  };
  let last = null;
  cv.addEventListener("pointerdown", (ev) => {
    ev.preventDefault();
    cv.setPointerCapture(ev.pointerId);
    last = pos(ev);
    dot(last[0], last[1]);
    render();
  });
  cv.addEventListener("pointermove", (ev) => {
    if (!last) return;
    const p = pos(ev);
    stroke(last, p);
    last = p;
    render();
  });
  for (const t of ["pointerup", "pointercancel", "lostpointercapture"]) cv.addEventListener(t, () => { last = null; });

  cv.addEventListener("focus", () => { cursor.shown = true; render(); });
  cv.addEventListener("blur", () => { cursor.shown = false; render(); });
  cv.addEventListener("keydown", (ev) => {
    const moves = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
    const paint = () => dot((cursor.x + 0.5) * cell, (cursor.y + 0.5) * cell);
    if (moves[ev.key]) {
      const [dx, dy] = moves[ev.key];
      cursor.x = Math.min(N - 1, Math.max(0, cursor.x + dx));
      cursor.y = Math.min(N - 1, Math.max(0, cursor.y + dy));
      if (cursor.pen) paint();
    } else if (ev.key === " ") {
      cursor.pen = !cursor.pen; // Space: pen down (paints while moving) / pen up
      if (cursor.pen) paint();
    } else if (ev.key === "Delete" || ev.key === "Backspace") {
      clearInk();
    } else {
      return;
    }
    ev.preventDefault();
    cv.setAttribute("aria-label", `Drawing area, 28 by 28 squares: at column ${cursor.x + 1}, row ${cursor.y + 1}, pen ${cursor.pen ? "down" : "up"}`);
    render();
  });

  // pixels turns the ink into a Float32Array(784) in [0,1], like an MNIST
  // digit: the ink's bounding box scaled (area average) into 20x20, then
  // shifted so its centre of mass is at the centre of the 28x28 image.
  // It returns null if nothing is drawn.
  function pixels() {
    const src = ic.getImageData(0, 0, S, S).data;
    let x0 = S, y0 = S, x1 = -1, y1 = -1;
    for (let y = 0; y < S; y++) {
      for (let x = 0; x < S; x++) {
        if (src[(y * S + x) * 4 + 3] > 0) {
          if (x < x0) x0 = x;
          if (x > x1) x1 = x;
          if (y < y0) y0 = y;
          if (y > y1) y1 = y;
        }
      }
    }
    if (x1 < 0) return null;
    const scale = 20 / Math.max(x1 - x0 + 1, y1 - y0 + 1);
    const ox = (N - (x1 - x0 + 1) * scale) / 2, oy = (N - (y1 - y0 + 1) * scale) / 2;
    const small = new Float32Array(N * N);
    for (let y = y0; y <= y1; y++) {
      const ty = Math.min(N - 1, Math.floor(oy + (y - y0 + 0.5) * scale));
      for (let x = x0; x <= x1; x++) {
        const a = src[(y * S + x) * 4 + 3];
        if (a === 0) continue;
        const tx = Math.min(N - 1, Math.floor(ox + (x - x0 + 0.5) * scale));
        small[ty * N + tx] += (a / 255) * scale * scale; // each source pixel covers scale^2 of a target pixel
      }
    }
    let m = 0, mx = 0, my = 0;
    for (let i = 0; i < N * N; i++) {
      small[i] = Math.min(1, small[i]);
      m += small[i];
      mx += small[i] * (i % N);
      my += small[i] * Math.floor(i / N);
    }
    const dx = Math.round((N - 1) / 2 - mx / m), dy = Math.round((N - 1) / 2 - my / m);
    const out = new Float32Array(N * N);
    for (let y = 0; y < N; y++) {
      for (let x = 0; x < N; x++) {
        const sx = x - dx, sy = y - dy;
        if (sx >= 0 && sx < N && sy >= 0 && sy < N) out[y * N + x] = small[sy * N + sx];
      }
    }
    return out;
  }

  // Drawings stay in this page until Start (or until the client is
  // running), so the last ones can be undone; each has a small preview.
  const note = $("drawings"), previews = $("drawing-previews"), undoBtn = $("undo-drawing");
  function showDrawings(lastLabel) {
    const n = drawn.length + given;
    note.dataset.value = n;
    note.textContent = n === 0 ? "No drawings yet." :
      `${n} drawing${n === 1 ? "" : "s"}` + (lastLabel === undefined ? "" : ` (the last one: a ${lastLabel})`) + ". They stay in this browser.";
    undoBtn.disabled = drawn.length === 0;
  }
  function preview(px, label) {
    const fig = document.createElement("figure");
    const c = document.createElement("canvas");
    c.width = c.height = N;
    const g = c.getContext("2d"), img = g.createImageData(N, N);
    for (let i = 0; i < N * N; i++) {
      const v = 255 - Math.round(255 * px[i]);
      img.data.set([v, v, v, 255], i * 4);
    }
    g.putImageData(img, 0, 0);
    c.setAttribute("role", "img");
    c.setAttribute("aria-label", `a drawing of ${label}`);
    const cap = document.createElement("figcaption");
    cap.textContent = String(label);
    fig.append(c, cap);
    previews.append(fig);
  }
  // giveDrawings hands the drawings so far to the client (from then on
  // they are part of training and can no longer be undone).
  function giveDrawings() {
    if (!api) return;
    while (drawn.length) {
      const d = drawn[0];
      api.addDrawing(d.pixels, d.label);
      drawn.shift();
      given++;
    }
    showDrawings();
  }

  $("add-drawing").addEventListener("click", () => {
    const px = pixels();
    if (!px) {
      note.textContent = "Draw a digit first.";
      return;
    }
    const label = Number($("label").value);
    drawn.push({ pixels: px, label });
    preview(px, label);
    if (running) {
      try { giveDrawings(); } catch (e) { note.textContent = `Could not add the drawing: ${friendly(errText(e))}`; return; }
    }
    showDrawings(label);
    clearInk();
  });
  undoBtn.addEventListener("click", () => {
    if (!drawn.length) return;
    drawn.pop();
    previews.lastElementChild?.remove();
    showDrawings();
  });
  $("clear-drawing").addEventListener("click", clearInk);

  render();
  load().catch((e) => {
    setRunning(false);
    startBtn.disabled = true;
    setError("Could not load the Blanket client. ", errText(e));
  });
})();
