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
  // The consent box: Start stays disabled until it is ticked. consentHash
  // is the wasm client's hash of the consent text shown (setTask), passed
  // to start only when the box is ticked.
  const consentBox = $("consent-box");
  consentBox.checked = false; // a reload (a new task) starts unticked, whatever the browser restores
  let consentHash = "";
  const agreed = () => consentBox.checked && consentHash !== "";

  let api = null;          // globalThis.blanket once ready
  let running = false;
  const drawn = [];        // drawings not yet handed to the client: {pixels, label}
  let given = 0;           // drawings handed to the client (cannot be undone)
  const totals = { messages: 0, bytes: 0 };

  // ---- what the class made, and this volunteer's part in it ----
  // From the relay's GET /api/round (the aggregator's public status) and
  // the relay's receipts for this volunteer's own reports (the wasm
  // client's "receipt" events). epsAt maps a finished round to the
  // ledger's ε as first seen with it: the ledger's total up to that round,
  // the same figure the projector shows.
  const cls = {
    accuracySource: "",
    protocol: "", accuracy: null, roundsOK: 0, epsilon: 0, target: 0, round: 0, stopped: "", lastAbort: null,
    epsAt: new Map(), included: new Set(), sent: new Set(), lastSent: 0, finished: false,
  };
  const fmt = (v) => String(parseFloat(Number(v).toPrecision(4)));
  // times and epsAnchor write what web.Times and web.EpsilonAnchor write
  // on the projector (the same sentence on both screens).
  function times(x) {
    if (x < 10) return x.toFixed(1);
    if (x < 1e4) return Math.round(x).toLocaleString("en-US");
    if (x < 1e6) return (Math.round(x / 100) * 100).toLocaleString("en-US");
    if (x < 1e9) return (x / 1e6).toFixed(1) + " million";
    if (x < 1e12) return (x / 1e9).toFixed(1) + " billion";
    return x.toPrecision(2);
  }
  function epsAnchor(eps) {
    if (!(eps > 0) || !Number.isFinite(eps)) return "";
    return `ε = ${fmt(eps)} means: anything the class sees (the model, its accuracy) is at most e^${fmt(eps)} ≈ ` +
      `${times(Math.exp(eps))} times more likely, or less likely, because of any one student's data than without it.`;
  }
  const list = (rs) => rs.length <= 1 ? rs.join("") : rs.slice(0, -1).join(", ") + " and " + rs[rs.length - 1];
  // myRounds: the rounds this volunteer's update was in (secure summation:
  // the relay's receipts; a shuffle protocol: the rounds it sent in that
  // were not cancelled, as the relay does not confirm single messages).
  function myRounds() {
    if (cls.protocol === "secagg" || cls.included.size) return [...cls.included].sort((a, b) => a - b);
    return [...cls.sent].filter((r) => r <= cls.round && !(cls.lastAbort && cls.lastAbort.round === r)).sort((a, b) => a - b);
  }
  // ledgerAfter is the ledger's ε after round r: as first seen with r or
  // a later round (the total only grows, so a later figure bounds it).
  function ledgerAfter(r) {
    let best;
    for (const [k, v] of cls.epsAt) if (k >= r && (best === undefined || k < best[0])) best = [k, v];
    return best ? best[1] : undefined;
  }
  // guessing says whether an accuracy is no better than guessing. The
  // digits: below twice the 1/10 of picking a digit at random (as the
  // dashboard). A study: at most 1/classes, what picking one of its classes
  // at random scores whatever their balance. (The dashboard compares a
  // study with its holdout's majority class, a higher bar this page does
  // not know; it says so on the projector.)
  function guessing(accuracy) {
    const classes = study.def && study.def.label && study.def.label.classes ? study.def.label.classes.length : 10;
    if (study.def && study.def.source !== "builtin") return accuracy <= 1 / classes;
    return accuracy < 2 / classes;
  }
  function showClass() {
    const acc = $("class-accuracy");
    if (study.def && study.def.source !== "builtin" && cls.accuracySource === "none") {
      acc.dataset.value = "";
      acc.textContent = "Accuracy cannot be shown: this study has no public test data, and your rows never leave your devices.";
    } else if (cls.accuracySource === "volunteers_private") {
      acc.dataset.value = "";
      acc.textContent = "Measured privately on everyone's own rows: each volunteer's count is hidden in a noisy sum. The projector shows the estimate with its uncertainty.";
    } else if (cls.accuracy === null || cls.accuracy === undefined) {
      acc.dataset.value = "";
      acc.textContent = "No round has updated the model yet.";
    } else {
      acc.dataset.value = String(cls.accuracy);
      const isStudy = study.def && study.def.source !== "builtin";
      acc.textContent = `${isStudy ? "is right on" : "recognizes"} ${(100 * cls.accuracy).toFixed(1)} % of the ${isStudy ? "public test rows" : "test digits"} (after ${cls.roundsOK} round${cls.roundsOK === 1 ? "" : "s"})` +
        (guessing(cls.accuracy) ? ": no better than guessing. The noise that protects each of you is larger than what so few updates learned together; the projector says more." : ".");
    }
    const mine = myRounds(), rj = $("rounds-joined");
    rj.dataset.value = String(mine.length);
    rj.dataset.rounds = mine.join(",");
    rj.textContent = mine.length === 0 ? "no round yet" :
      (cls.protocol === "secagg" || cls.included.size ? `the class's sum of round${mine.length === 1 ? "" : "s"} ${list(mine)}` :
        `the shuffled messages of round${mine.length === 1 ? "" : "s"} ${list(mine)}`);
    const my = $("my-epsilon");
    if (!mine.length) {
      my.dataset.value = "0";
      my.textContent = "0: no update of yours has been used yet";
    } else {
      const last = mine[mine.length - 1], e = ledgerAfter(last);
      if (e === undefined) {
        my.textContent = `waiting for the ledger's figure for round ${last}…`;
      } else {
        my.dataset.value = String(e);
        my.dataset.round = String(last);
        my.textContent = `ε = ${fmt(e)}: what the class's privacy ledger charged up to round ${last}, the last round with your update`;
      }
    }
    const ce = $("class-epsilon");
    if (cls.target > 0) {
      ce.dataset.value = String(cls.epsilon);
      ce.dataset.target = String(cls.target);
      ce.textContent = `The whole class so far: ε = ${fmt(cls.epsilon)} of at most ${fmt(cls.target)} (the figure on the projector).`;
      $("eps-meaning").textContent = epsAnchor(cls.target);
    }
  }
  function setProtocol(p) {
    if (!p || p === cls.protocol) return;
    cls.protocol = p;
    $("eps-field").dataset.protocol = p;
    // A personal privacy level applies only where a volunteer's browser
    // adds its own noise: the shuffle protocols and APES, not secure
    // summation (the servers add the noise).
    $("eps-field").hidden = p === "secagg";
    if (p === "secagg") $("eps-level").value = "0";
  }
  function updateClass(info) {
    if (!info.reachable) return;
    setProtocol(info.protocol);
    if (info.round < cls.round) { // a new class: its own rounds and ledger
      forget();
      taskChanged();
    }
    if (info.round > 0 && !cls.epsAt.has(info.round)) cls.epsAt.set(info.round, info.epsilon || 0);
    const newRound = info.round !== cls.round;
    cls.round = info.round;
    cls.accuracy = info.accuracy;
    if (info.accuracy_source) cls.accuracySource = info.accuracy_source;
    cls.roundsOK = info.rounds_ok || 0;
    cls.epsilon = info.epsilon || 0;
    cls.target = info.target_epsilon || 0;
    cls.lastAbort = info.last_abort || null;
    const a = cls.lastAbort, mn = $("my-note");
    // A cancelled round this volunteer sent in: say why with the numbers
    // (the relay's receipt may come before the status that has them; a
    // shuffle protocol has no receipts at all).
    if (a && cls.sent.has(a.round) && (cls.protocol !== "secagg" || (mn.dataset.state === "cancelled" && mn.dataset.round === String(a.round))) &&
        mn.dataset.numbers !== String(a.round)) {
      myNote(a.round, "cancelled", `Round ${a.round}: your update was not used: ${cancelledWhy(a.round, "the round was cancelled")}.`);
      mn.dataset.numbers = String(a.round);
    }
    const was = cls.stopped;
    cls.stopped = info.stopped || "";
    if (cls.stopped && !cls.finished) finish();
    if (!cls.stopped && was) reopen();
    if (newRound) document.dispatchEvent(new Event("blanket-round"));
    showClass();
  }
  // finish is the end of training: nothing more to send, Stop off, the
  // final accuracy in the status.
  function finish() {
    cls.finished = true;
    if (api && running) {
      try { api.stop(); } catch { /* already stopped */ }
    }
    running = false;
    startBtn.disabled = true;
    stopBtn.disabled = true;
    const acc = cls.accuracy === null || cls.accuracy === undefined ? "" :
      ` The class model recognizes ${(100 * cls.accuracy).toFixed(1)} % of the test digits.`;
    setStatus("finished", `Training is finished (${cls.stopped}).${study.def && study.def.source !== "builtin" ? "" : acc} Thank you for taking part!` +
      (study.def && study.def.source !== "builtin" ? "" : " Try the model below: draw a digit."));
    progressEl.value = 0;
  }
  // reopen: the teacher started a new class after the end.
  function reopen() {
    cls.finished = false;
    forget();
    setRunning(false);
    if (api) setStatus("idle", "A new class has started: press Start to take part.");
  }
  // forget drops what the page knew of the rounds of a previous class.
  function forget() {
    cls.epsAt.clear();
    cls.included.clear();
    cls.sent.clear();
    cls.lastSent = 0;
    const n = $("my-note");
    n.dataset.round = n.dataset.state = n.dataset.numbers = n.textContent = "";
  }
  // myNote says what became of this volunteer's update in round r (kept
  // under the status while the next round runs).
  function myNote(r, state, text) {
    const el = $("my-note");
    if (Number(el.dataset.round || 0) > r) return;
    el.dataset.round = String(r);
    el.dataset.state = state;
    el.textContent = text;
  }
  // cancelledWhy says in words why round r had no sum.
  function cancelledWhy(r, why) {
    const a = cls.lastAbort;
    if (a && a.round === r && /min batch/.test(a.reason || "")) {
      return `the round was cancelled: only ${a.received} update${a.received === 1 ? "" : "s"} arrived in ${Math.round(a.timeout)} s, ` +
        `and a round needs at least ${a.min_batch}, so that no small sum gives anyone away`;
    }
    return why || "the round had no sum";
  }

  const errText = (e) => (e && e.message) || String(e);
  // friendly turns a Go or browser error into words for a student; the
  // original stays under "Technical details".
  function friendly(raw) {
    const e = String(raw || "");
    const rules = [
      [/fingerprint|pinned/i, "The teacher's key does not match the one this server gives out. Do not join; tell the teacher."],
      [/no local data|no drawings/i, study.def && study.def.source !== "builtin" ? "Load your data file or answer the questions first." : "Add at least one drawing first, or choose the sample digits."],
      [/budget|exhaust/i, "The class has used up its privacy budget, so training is over. Thank you for taking part!"],
      [/too late|no open round|wrong round|not invited/i, "This round closed before your update arrived. You will take part in the next one."],
      [/stale|old round/i, "Your device missed a round. Waiting for the next one."],
      [/websocket|dial|connect|closed|network|fetch|refused|timeout|HTTP 5/i,
        "Cannot reach the class server. Check that this device is on the same Wi-Fi as the teacher's laptop, then press Start again."],
    ];
    for (const [re, text] of rules) if (re.test(e)) return text;
    return "Something went wrong. Press Start to try again; if it keeps happening, tell the teacher.";
  }
  let shownAfterStart = false; // the status scrolled into view once after Start
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
    startBtn.disabled = on || !api || cls.finished || !agreed();
    stopBtn.disabled = !on || cls.finished;
    consentBox.disabled = on || !api || consentHash === "";
    for (const el of form.querySelectorAll("input[name=source], #eps-level, #task-file, #task-questions input, #task-questions select")) el.disabled = on;
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
    // Once after Start, when the round's state is first known: the page
    // above the status (the consent text, the choices) may have moved it
    // below a phone's screen while the data was prepared.
    if (running && !shownAfterStart) {
      shownAfterStart = true;
      statusEl.scrollIntoView({ block: "nearest" });
    }
    const p = phase();
    progressEl.hidden = cls.finished;
    if (cls.finished) {
      progressLabel.textContent = "Training is over";
    } else if (p === "training") {
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
        updateClass(info);
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
    await studyReady;
    if (!study.def) {
      setStatus("error", "The study's consent text could not be loaded, so you cannot join yet. Reload the page in a moment.");
      return;
    }
    // Every task, the built-in digits included: the module keeps the
    // consent text the page shows and hashes it (task.ConsentHash).
    const r = api.setTask(study.json);
    if (!r.ok) {
      setStatus("error", "This study's definition could not be read; tell the teacher.", r.error);
      return;
    }
    showConsentVersion(r.consentHash, r.consentVersion);
    if (study.bytes) checkCSV(study.bytes);
    // Learn whether the class is still training before offering Start: a
    // student who opens the page after the end sees "finished", not a
    // Start button that can only fail.
    await pollRound();
    setRunning(false);
    if (cls.finished) finish();
    else setStatus("idle", "Ready. Read the text above, tick the box if you agree, make your choices, then press Start.");
    api.onEvent(onEvent); // after "Ready": the client may report at once
  }

  function onEvent(e) {
    const round = e.round ? `Round ${e.round}: ` : "";
    if (e.round && e.kind === "announcement") pollRound();
    if (e.protocol) setProtocol(e.protocol);
    if (cls.finished && !["receipt", "privacy", "sent", "ack"].includes(e.kind)) return;
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
        cls.sent.add(e.round);
        cls.lastSent = e.round;
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
      case "evaluated": {
        // The announced model on the volunteer's own rows (client
        // EventEvaluated): shown here only; what leaves the device is its
        // secret-shared count in the round's private evaluation.
        const ma = $("my-accuracy");
        ma.dataset.value = String(e.accuracy);
        ma.dataset.round = String(e.round);
        ma.dataset.correct = String(e.correct);
        ma.dataset.evaluated = String(e.evaluated);
        ma.textContent = `Round ${e.round}: the class model got ${e.correct} of your ${e.evaluated} rows right (${(100 * e.accuracy).toFixed(1)}%). ` +
          "Only a secret-shared count leaves your device; the class sees the noisy total of everyone's.";
        break;
      }
      case "privacy":
        // The client's own count: every round it sent in, whether or not
        // the round's sum used it, each at the local guarantee of a
        // report. Shown only where the browser adds its own noise.
        if (Number.isFinite(e.epsilon) && cls.protocol && cls.protocol !== "secagg") {
          const le = $("local-epsilon");
          le.hidden = false;
          le.dataset.value = String(e.epsilon);
          le.textContent = `Even without the shuffle, your own noisy messages alone are ε = ${e.epsilon.toPrecision(3)}-private over the ${e.rounds} round${e.rounds === 1 ? "" : "s"} you sent in.`;
        }
        break;
      case "receipt":
        if (e.state === "included") {
          cls.included.add(e.round);
          myNote(e.round, "included", `Round ${e.round}: your update is in the class's sum.`);
          if (e.round === cls.lastSent && ["sent", "waiting"].includes(phase())) {
            setStatus("sent", `Round ${e.round}: your update is in the class's sum. Waiting for the next round…`);
          }
        } else if (e.state === "excluded") {
          const text = `Round ${e.round}: your update was not used: ${cancelledWhy(e.round, e.why)}.`;
          myNote(e.round, "cancelled", text);
          if (e.round === cls.lastSent && ["sent", "waiting"].includes(phase())) setStatus("cancelled", `${text} Waiting for the next round…`);
        }
        showClass();
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
        if (cls.finished) break;
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
  // The short class code a student typed (http://relay/CODE, which the
  // relay sends here as "#code=…"): the first characters of the key's
  // fingerprint. A short pin: the key must start with it, and the page
  // asks to compare the whole fingerprint with the projector.
  const linkCode = (new URLSearchParams(location.hash.slice(1)).get("code") || "").toLowerCase();

  // readyFingerprint waits up to 30 s for the relay to have the
  // aggregator's key (a relay started just before the aggregator fetches
  // it with backoff): "" if it still has none.
  async function readyFingerprint() {
    for (let i = 0; i < 30; i++) {
      const fp = await servedFingerprint();
      if (fp) return fp;
      setStatus("connecting", "The class server is still starting: waiting for it…");
      await new Promise((r) => setTimeout(r, 1000));
    }
    return "";
  }

  async function keyFingerprint() {
    if (linkFp) {
      const served = await readyFingerprint();
      if (served && served !== linkFp) {
        throw new Error("pinned key fingerprint mismatch: the class link names " + linkFp + ", this server gives out " + served);
      }
      fpEl.dataset.value = linkFp;
      fpEl.textContent = linkFp + " (from the class link)";
      return linkFp;
    }
    const served = await readyFingerprint();
    if (linkCode && served) {
      if (!served.toLowerCase().startsWith(linkCode)) {
        throw new Error("pinned key fingerprint mismatch: the class code is " + linkCode + ", this server gives out " + served);
      }
      fpEl.textContent = served + " (starts with the class code " + linkCode + "; compare all of it with the teacher's screen)";
    }
    return served;
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
    if (!api || running || cls.finished) return;
    if (!agreed()) {
      setStatus("error", "Read the text at the top and tick “I have read this and agree” first.");
      consentBox.focus();
      return;
    }
    const isStudy = study.def && study.def.source !== "builtin";
    const source = isStudy ? "task" : form.querySelector("input[name=source]:checked").value;
    if (isStudy && !studyRows()) return;
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
    shownAfterStart = false;
    progressEl.value = 0;
    $("live").scrollIntoView({ block: "nearest" });
    const relay = `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/ws`;
    try {
      await api.start({ relay, fingerprint, source, shardSeed, epsLevel: Number($("eps-level").value) || 0, consent: consentHash });
    } catch (e) {
      setRunning(false);
      // The class may have ended while this student was drawing: say so
      // rather than "could not start".
      await pollRound();
      if (cls.finished) finish();
      else setError("Could not start. ", errText(e));
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

  // ---- drawing: pointer or keyboard on a 280x280 canvas, 28x28 out (pad.js) ----
  const pad = BlanketPad.attach($("canvas"));
  const pixels = () => pad.pixels(), clearInk = () => pad.clear();
  const N = 28;

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

  // ---- a study's own data (the relay's GET /api/task) ----
  // A "csv" study: the volunteer picks a file, read here and parsed by the
  // wasm client (blanket.parseCSV: task.ParseCSV), checked against the
  // declared columns, ranges and categories, with the rows it cannot use
  // listed; the file's bytes go to the wasm module only, never into a
  // request. A "form" study: one row per volunteer, answered on a form
  // built from the schema (blanket.setAnswers: task.EncodeAnswers).
  const study = { def: null, json: "", bytes: null, rows: 0 };
  const studyReady = (async () => {
    try {
      const r = await fetch("/api/task", { cache: "no-store" });
      if (!r.ok) return;
      study.json = await r.text();
      study.def = JSON.parse(study.json);
    } catch { return; }
    showConsent(study.def);
    if (study.def.source === "builtin") return;
    showStudy(study.def);
  })();
  // showConsent shows the task's consent text (the digits' too): the text
  // the box agrees to, and the one the wasm client hashes.
  function showConsent(t) {
    const c = $("task-consent");
    c.textContent = t.consent;
    c.dataset.task = t.name;
    c.hidden = false;
    $("digits-lead").hidden = true;
    $("consent-agree").hidden = false;
  }
  // showConsentVersion shows the short consent version (the first 8 hex
  // digits of the hash a study publishes) and lets the volunteer agree.
  function showConsentVersion(hash, version) {
    consentHash = hash || "";
    const v = $("consent-version");
    v.dataset.value = version || "";
    v.textContent = version ? `Consent version ${version}: a study's publication names the consent text its reports were given under by this number.` : "";
    $("task-consent").dataset.consent = version || "";
    setRunning(running);
  }
  consentBox.addEventListener("change", () => setRunning(running));
  // taskChanged reloads the page when a new class studies another task
  // (chosen on the operator page) or another consent text: its consent
  // text, data and model are not this page's, and the volunteer has not
  // agreed to it (the reloaded page's box is unticked). Checked at
  // once and again after the relay's cache of the definition (10 s).
  function taskChanged() {
    const check = async () => {
      if (!study.def) return;
      try {
        const r = await fetch("/api/task", { cache: "no-store" });
        if (!r.ok) return;
        const t = await r.json();
        if (t.name !== study.def.name || t.consent !== study.def.consent) location.reload();
      } catch { /* the relay is restarting: the next check */ }
    };
    check();
    setTimeout(check, 11000);
  }
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function showStudy(t) {
    document.title = `Blanket: ${t.title}`;
    $("join-title").textContent = t.title;
    $("digits-source").hidden = true;
    $("source-shard").checked = false;
    $("drawing").hidden = true;
    const ts = $("try-section");
    if (ts) ts.hidden = true;
    const box = $("task-data");
    box.hidden = false;
    box.dataset.source = t.source;
    if (t.source === "csv") {
      $("task-data-legend").textContent = "Your data file";
      $("task-csv").hidden = false;
      const cols = [];
      for (const f of t.features) {
        if (f.type === "categorical") cols.push(`${f.name} (${f.categories.join(", ")})`);
        else if (f.count > 1) cols.push(`${f.name}_0 … ${f.name}_${f.count - 1} (${f.min} to ${f.max})`);
        else cols.push(`${f.name} (${f.min} to ${f.max})`);
      }
      cols.push(`${t.label.name} (${t.label.classes.join(", ")})`);
      const tc = $("task-columns"), det = el("details"), ul = el("ul");
      det.append(el("summary", {}, `The ${cols.length} columns and their declared ranges`), ul);
      for (const c of cols) ul.append(el("li", {}, c));
      tc.replaceChildren(el("p", {}, "The first row names the columns, in any order; other columns are ignored. A value outside its range is not used."), det);
      $("task-file").addEventListener("change", readCSV);
    } else if (t.source === "form") {
      $("task-data-legend").textContent = "Your answers";
      $("task-form").hidden = false;
      const q = $("task-questions");
      t.features.forEach((f, i) => q.append(question(`task-q${i}`, f.name, f.question || f.name, f)));
      q.append(question("task-q-label", t.label.name, t.label.question || t.label.name,
        { type: "categorical", categories: t.label.classes }));
    }
  }
  // question is one form field: a number within the declared range or a
  // choice among the declared categories, labelled by the question.
  function question(id, name, text, f) {
    const d = el("div", { class: "field" });
    d.append(el("label", { for: id }, text));
    let input;
    if (f.type === "categorical") {
      input = el("select", { id, name, required: "" });
      input.append(el("option", { value: "" }, "Choose…"));
      for (const c of f.categories) input.append(el("option", { value: c }, c));
    } else {
      input = el("input", { id, name, type: "number", inputmode: "decimal", min: f.min, max: f.max, step: "any", required: "",
        "aria-describedby": id + "-hint" });
      d.append(input, el("p", { id: id + "-hint", class: "hint" }, `A number from ${f.min} to ${f.max}.`));
      d.append(el("p", { id: id + "-err", class: "field-error", hidden: "" }));
      return d;
    }
    d.append(input, el("p", { id: id + "-err", class: "field-error", hidden: "" }));
    return d;
  }
  async function readCSV() {
    const f = $("task-file").files[0];
    study.rows = 0;
    if (!f) return;
    const res = $("task-csv-result");
    res.dataset.state = "";
    res.textContent = `Reading ${f.name} here on this device…`;
    study.bytes = new Uint8Array(await f.arrayBuffer());
    if (api) checkCSV(study.bytes);
  }
  // checkCSV hands the file to the wasm client and shows what it found.
  function checkCSV(bytes) {
    const res = $("task-csv-result"), list = $("task-csv-errors");
    const r = api.parseCSV(bytes);
    study.bytes = null; // the module has the rows now
    list.replaceChildren();
    res.dataset.rows = String(r.rows || 0);
    res.dataset.skipped = String(r.skipped || 0);
    study.rows = r.ok ? r.rows : 0;
    if (!r.ok && !(r.skipped > 0)) {
      res.dataset.state = "error";
      res.textContent = `This file cannot be used: ${String(r.error || "").replace(/^task: /, "").replace(/: unusable data$/, "")}.`;
      return;
    }
    res.dataset.state = r.ok ? "ok" : "error";
    res.textContent = (r.ok ? `${r.rows} row${r.rows === 1 ? "" : "s"} ready to learn from. They stay on this device.` : "No row of this file can be used.") +
      (r.skipped ? ` ${r.skipped} row${r.skipped === 1 ? "" : "s"} cannot be used and will be skipped:` : "") +
      (r.ignored && r.ignored.length ? ` (Ignored columns: ${r.ignored.join(", ")}.)` : "");
    for (const e of r.errors || []) list.append(el("li", { "data-row": e.row, "data-column": e.column }, e.text));
    if (r.skipped > (r.errors || []).length) list.append(el("li", {}, `… and ${r.skipped - r.errors.length} more.`));
  }
  // studyRows checks that the volunteer's rows are ready (and for a form,
  // encodes the answers): false, with the reason on the page, if not.
  function studyRows() {
    if (!api) return false;
    if (study.def.source === "csv") {
      if (study.rows > 0) return true;
      setStatus("error", "Choose a CSV file with at least one usable row first.");
      $("task-file").focus();
      return false;
    }
    const answers = {}, q = $("task-questions");
    for (const input of q.querySelectorAll("input, select")) {
      input.removeAttribute("aria-invalid");
      const err = $(input.id + "-err");
      err.hidden = true;
      if (input.value.trim() === "") {
        input.setAttribute("aria-invalid", "true");
        err.textContent = "Please answer this question.";
        err.hidden = false;
        input.focus();
        setStatus("error", "Answer every question first.");
        return false;
      }
      answers[input.name] = input.value.trim();
    }
    const r = api.setAnswers(answers);
    if (!r.ok) {
      const input = q.querySelector(`[name="${CSS.escape(r.column || "")}"]`);
      const msg = (r.message || r.error || "").replace(/^is /, "This is ");
      if (input) {
        input.setAttribute("aria-invalid", "true");
        const err = $(input.id + "-err");
        err.textContent = msg;
        err.hidden = false;
        input.focus();
      }
      setStatus("error", `Check your answers: ${msg}`);
      return false;
    }
    $("task-form-result").textContent = "Your answers are ready; they stay on this device.";
    return true;
  }

  load().catch((e) => {
    setRunning(false);
    startBtn.disabled = true;
    setError("Could not load the Blanket client. ", errText(e));
  });
})();
