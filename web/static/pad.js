// Blanket drawing pad: a 280x280 canvas drawn with a finger, a pen, the
// mouse or the keyboard, read out as a 28x28 digit like MNIST's
// (BlanketPad.attach), and "draw a digit, see the class model's guess" for
// every .try-model on the page (the model from its data-predictor URL, the
// relay's GET /api/predictor). A model over raw pixels (folded) is applied
// here; a model over a feature map (scatter1) is applied by the wasm
// module (blanket.setPredictor and blanket.predict: map, standardize,
// logits), the page's own or, with data-wasm, loaded on the first drawing
// that needs it. The drawing never leaves the page.
(() => {
  "use strict";
  const N = 28;

  // attach makes canvas a drawing pad; onInk runs after every stroke.
  function attach(cv, onInk) {
    const view = cv.getContext("2d");
    const S = cv.width, cell = S / N;
    const ink = document.createElement("canvas");
    ink.width = ink.height = S;
    const ic = ink.getContext("2d", { willReadFrequently: true });
    ic.lineCap = ic.lineJoin = "round";
    ic.lineWidth = 2.2 * cell;
    ic.strokeStyle = ic.fillStyle = "#000";
    const cursor = { x: 13, y: 13, pen: false, shown: false };
    const inked = () => { if (onInk) onInk(); };

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
    function clear() {
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
    for (const t of ["pointerup", "pointercancel", "lostpointercapture"]) {
      cv.addEventListener(t, () => { if (last) { last = null; inked(); } });
    }
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
        clear();
      } else {
        return;
      }
      ev.preventDefault();
      cv.setAttribute("aria-label", `Drawing area, 28 by 28 squares: at column ${cursor.x + 1}, row ${cursor.y + 1}, pen ${cursor.pen ? "down" : "up"}`);
      render();
      inked();
    });

    // pixels turns the ink into a Float32Array(784) in [0,1], like an
    // MNIST digit: the ink's bounding box scaled (area average) into
    // 20x20, then shifted so its centre of mass is at the centre of the
    // 28x28 image. It returns null if nothing is drawn.
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
    render();
    return { pixels, clear, render };
  }

  // probabilities is the model's softmax over the classes for pixels x.
  function probabilities(model, x) {
    const F = model.features, C = model.classes, z = new Float64Array(C);
    for (let c = 0; c < C; c++) {
      let s = model.bias[c];
      const w = model.weights, o = c * F;
      for (let j = 0; j < F; j++) s += w[o + j] * x[j];
      z[c] = s;
    }
    const top = Math.max(...z);
    let sum = 0;
    for (let c = 0; c < C; c++) { z[c] = Math.exp(z[c] - top); sum += z[c]; }
    for (let c = 0; c < C; c++) z[c] /= sum;
    return z;
  }

  // wasmAPI resolves to globalThis.blanket with predict, or null when this
  // page cannot have it: src is the module's URL to load (once per page,
  // with /static/wasm_exec.js); without one the page loads the module
  // itself (the join page) and this waits for its blanket-ready event.
  let wasmLoading = null, wasmModel = null;
  function wasmAPI(src) {
    const api = () => (globalThis.blanket && typeof globalThis.blanket.predict === "function" ? globalThis.blanket : null);
    if (api()) return Promise.resolve(api());
    if (wasmLoading) return wasmLoading;
    const ready = (ms) => new Promise((resolve) => {
      const done = () => resolve(api());
      globalThis.addEventListener("blanket-ready", done, { once: true });
      document.addEventListener("blanket-ready", done, { once: true });
      setTimeout(done, ms);
    });
    if (!src) {
      if (typeof Go !== "function") return Promise.resolve(null); // no wasm_exec.js: the page runs no module
      wasmLoading = ready(60000);
      return wasmLoading;
    }
    wasmLoading = (async () => {
      if (typeof Go !== "function") {
        await new Promise((resolve, reject) => {
          const sc = document.createElement("script");
          sc.src = "/static/wasm_exec.js";
          sc.onload = resolve;
          sc.onerror = reject;
          document.head.append(sc);
        });
      }
      const go = new Go();
      const isReady = ready(60000);
      let result;
      try {
        result = await WebAssembly.instantiateStreaming(fetch(src), go.importObject);
      } catch {
        const resp = await fetch(src);
        if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
        result = await WebAssembly.instantiate(await resp.arrayBuffer(), go.importObject);
      }
      go.run(result.instance);
      return api() || await isReady;
    })().catch(() => null);
    return wasmLoading;
  }

  // wasmGuess is the wasm module's {class, probabilities} for pixels x
  // under model (handed to the module when it is not the one it has), or
  // {error}.
  function wasmGuess(api, model, x) {
    if (wasmModel !== model) {
      const r = api.setPredictor(model);
      if (!r || !r.ok) return { error: (r && r.error) || "the model was refused" };
      wasmModel = model;
    }
    return api.predict(x) || { error: "no guess" };
  }

  // try wires one .try-model box.
  function tryModel(box) {
    const id = (s) => document.getElementById(`${box.dataset.prefix}-${s}`);
    const guess = id("guess"), bars = id("bars"), info = id("model"), url = box.dataset.predictor;
    let model = null, version = "", api = null, apiState = "";
    for (let c = 0; c < 10; c++) {
      const li = document.createElement("li");
      li.innerHTML = `<span class="d">${c}</span><span class="bar"><span></span></span><span class="p">–</span>`;
      bars.append(li);
    }
    function show() {
      const x = pad.pixels();
      if (!x) {
        guess.dataset.value = "";
        guess.textContent = "Draw a digit in the square.";
        for (const li of bars.children) { li.querySelector(".bar span").style.width = "0"; li.querySelector(".p").textContent = "–"; li.classList.remove("top"); }
        return;
      }
      if (!model) {
        guess.textContent = "The class model is not loaded yet.";
        return;
      }
      let p, best = 0;
      if (model.folded === false) { // a feature map: the wasm module computes the guess
        if (!api && globalThis.blanket && typeof globalThis.blanket.predict === "function") api = globalThis.blanket;
        if (!api) {
          if (apiState === "") {
            apiState = "loading";
            wasmAPI(box.dataset.wasm).then((a) => { api = a; apiState = a ? "ready" : "none"; show(); });
          }
          guess.dataset.value = "";
          guess.textContent = apiState === "none"
            ? "This page cannot compute the class model’s features: try it on the join page."
            : "Loading the class model’s feature map…";
          return;
        }
        const r = wasmGuess(api, model, x);
        if (r.error) {
          guess.dataset.value = "";
          guess.textContent = "The class model cannot read this drawing right now.";
          return;
        }
        p = r.probabilities;
        best = r.class;
      } else {
        p = probabilities(model, x);
        for (let c = 1; c < p.length; c++) if (p[c] > p[best]) best = c;
      }
      guess.dataset.value = String(best);
      guess.dataset.confidence = String(p[best]);
      guess.textContent = model.rounds_ok > 0
        ? `The class model thinks this is a ${best} (${Math.round(100 * p[best])} % sure)` +
          (model.accuracy != null && model.accuracy < 0.2 ? ", but it is no better than guessing: too few updates for this much privacy." : ".")
        : `The class model has not learned anything yet, so its guess (${best}) is random.`;
      [...bars.children].forEach((li, c) => {
        li.querySelector(".bar span").style.width = `${(100 * p[c]).toFixed(1)}%`;
        li.querySelector(".p").textContent = `${Math.round(100 * p[c])} %`;
        li.classList.toggle("top", c === best);
      });
    }
    const pad = attach(id("canvas"), show);
    id("clear").addEventListener("click", () => { pad.clear(); show(); });
    async function load() {
      try {
        const r = await fetch(url, { cache: "no-cache" }); // a 304 while the model is the same
        if (!r.ok) throw new Error(`HTTP ${r.status}`);
        const m = await r.json();
        const v = `${m.round}.${m.rounds_ok}`;
        if (v !== version) {
          m.weights = Float32Array.from(m.weights);
          m.bias = Float64Array.from(m.bias);
          if (m.mean) { m.mean = Float64Array.from(m.mean); m.std = Float64Array.from(m.std); }
          model = m;
          version = v;
          info.dataset.round = String(m.round);
          info.textContent = m.rounds_ok > 0
            ? `The class model after round ${m.round}` + (m.accuracy != null ? `: right on ${(100 * m.accuracy).toFixed(1)} % of the test digits.` : ".")
            : "No round has updated the class model yet.";
          show();
        }
      } catch {
        if (!model) info.textContent = "The class model cannot be loaded right now.";
      }
    }
    load();
    setInterval(load, 15000);
    document.addEventListener("blanket-round", load);
  }

  globalThis.BlanketPad = { attach, probabilities };
  const boot = () => document.querySelectorAll(".try-model").forEach(tryModel);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
  else boot();
})();
