// The emulator's control panel: a form per direction, one-shots, live charts and the change
// log. Polls /api/state twice a second; every change goes through POST /api/apply or
// /api/action, which take the emulator's own path (the one PUT /conditions takes).
"use strict";
(() => {
  const token = new URLSearchParams(location.search).get("token") || "";
  const $ = (id) => document.getElementById(id);
  const D = Charts.duration, SI = Charts.si;
  const KEYS = ["a_to_b", "b_to_a"];
  const COVERED = new Set(["delay", "jitter", "jitter-dist", "loss", "duplicate", "reorder", "corrupt",
    "rate", "limit", "aqm", "ecn", "schedule", "trace", "delay-trace"]);
  let state = null, presets = [], series = [], seq = 0, dirty = false, formBuilt = false;
  let lastText = "", charted = false;

  async function call(method, path, body) {
    const r = await fetch(path, {
      method, headers: { "X-Latlab-Token": token, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    let json = null;
    try { json = JSON.parse(text); } catch (_) { /* a line of text */ }
    return { status: r.status, json, text: text.trim() };
  }
  function message(text, ok) { const m = $("message"); m.textContent = text || ""; m.className = ok ? "ok" : ""; }

  // --- the form ---------------------------------------------------------------------------
  function input(attrs) { const i = document.createElement("input"); Object.assign(i, attrs); return i; }
  function select(options) {
    const s = document.createElement("select");
    for (const [v, t] of options) { const o = document.createElement("option"); o.value = v; o.textContent = t; s.appendChild(o); }
    return s;
  }
  function fieldRow(grid, dir, key, label, nodes) {
    const l = document.createElement("label"); l.textContent = label; l.htmlFor = `${dir}-${key}`;
    const f = document.createElement("div"); f.className = "field";
    nodes.forEach((n) => f.appendChild(n));
    const e = document.createElement("span"); e.className = "err"; e.id = `err-${dir}-${key}`;
    f.appendChild(e);
    grid.appendChild(l); grid.appendChild(f);
  }
  function rangePair(dir, key, max, step, unit) {
    const r = input({ type: "range", min: 0, max, step, id: `${dir}-${key}-range` });
    const n = input({ type: "number", min: 0, step, id: `${dir}-${key}` });
    r.addEventListener("input", () => { n.value = r.value; edited(); });
    n.addEventListener("input", () => { r.value = n.value; edited(); });
    const u = document.createElement("span"); u.className = "muted"; u.textContent = unit;
    return [r, n, u];
  }
  function unit(text) { const u = document.createElement("span"); u.className = "muted"; u.textContent = text; return u; }
  function edited() { dirty = true; $("apply-result").textContent = "edited, not applied"; }

  function buildForm(st) {
    const box = $("dirs");
    box.replaceChildren();
    st.directions.forEach((d, i) => {
      const dir = KEYS[i];
      const card = document.createElement("div");
      const h = document.createElement("h2"); h.textContent = d.name; card.appendChild(h);
      const now = document.createElement("p"); now.className = "mono muted"; now.id = `${dir}-in-force`; card.appendChild(now);
      const grid = document.createElement("div"); grid.className = "fields"; card.appendChild(grid);
      fieldRow(grid, dir, "delay", "delay", rangePair(dir, "delay", 1000, 1, "ms"));
      fieldRow(grid, dir, "jitter", "jitter", rangePair(dir, "jitter", 200, 1, "ms"));
      const dist = select([["uniform", "uniform"], ["normal", "normal"], ["pareto", "pareto"], ["paretonormal", "paretonormal"], ["table", "table (from its file)"]]);
      dist.id = `${dir}-jitter-dist`;
      fieldRow(grid, dir, "jitter-dist", "jitter dist.", [dist]);
      const model = select([["none", "none"], ["random", "random"], ["gemodel", "Gilbert-Elliott"], ["state", "4-state"]]);
      model.id = `${dir}-loss-model`;
      const lossP = input({ type: "number", min: 0, max: 100, step: "any", id: `${dir}-loss` });
      const lossParams = input({ type: "text", id: `${dir}-loss-params`, placeholder: "p,r,1-h,1-k in %" });
      fieldRow(grid, dir, "loss", "loss", [model, lossP, unit("%"), lossParams]);
      const showLoss = () => {
        lossP.hidden = model.value !== "random";
        lossParams.hidden = !(model.value === "gemodel" || model.value === "state");
        lossParams.placeholder = model.value === "state" ? "p13,p31,p32,p23,p14 in %" : "p,r,1-h,1-k in %";
      };
      model.addEventListener("change", () => { showLoss(); edited(); });
      model._show = showLoss;
      fieldRow(grid, dir, "duplicate", "duplicate", [input({ type: "number", min: 0, max: 100, step: "any", id: `${dir}-duplicate` }), unit("%")]);
      fieldRow(grid, dir, "reorder", "reorder", [input({ type: "number", min: 0, max: 100, step: "any", id: `${dir}-reorder` }), unit("%  gap"),
        input({ type: "number", min: 1, step: 1, id: `${dir}-reorder-gap` })]);
      fieldRow(grid, dir, "corrupt", "corrupt", [input({ type: "number", min: 0, max: 100, step: "any", id: `${dir}-corrupt` }), unit("%")]);
      const rateUnit = select([["kbit", "kbit/s"], ["mbit", "Mbit/s"], ["gbit", "Gbit/s"]]); rateUnit.id = `${dir}-rate-unit`;
      fieldRow(grid, dir, "rate", "rate", [input({ type: "number", min: 0, step: "any", id: `${dir}-rate`, placeholder: "unlimited" }), rateUnit]);
      fieldRow(grid, dir, "limit", "queue limit", [input({ type: "number", min: 0, step: 1, id: `${dir}-limit`, placeholder: "none" }), unit("frames")]);
      const aqm = select([["tail", "tail drop"], ["codel", "CoDel"], ["fq_codel", "FQ-CoDel"], ["pie", "PIE"], ["dualpi2", "DualPI2"]]); aqm.id = `${dir}-aqm`;
      const ecnBox = input({ type: "checkbox", id: `${dir}-ecn` });
      fieldRow(grid, dir, "aqm", "AQM", [aqm, ecnBox, unit("ECN")]);
      fieldRow(grid, dir, "extra", "other keys", [input({ type: "text", id: `${dir}-extra`, placeholder: "overhead=24 target=5ms" })]);
      box.appendChild(card);
      card.querySelectorAll("input,select").forEach((n) => {
        if (!n.id.endsWith("-range") && n !== model) n.addEventListener("input", edited);
        if (n.tagName === "SELECT" && n !== model) n.addEventListener("change", edited);
      });
    });
    formBuilt = true;
  }

  function pct(p) { return Number((p * 100).toPrecision(6)); }
  function fill(i, d) {
    const dir = KEYS[i];
    const set = (id, v) => { const n = $(`${dir}-${id}`); if (n.type === "checkbox") n.checked = !!v; else n.value = v; };
    set("delay", d.delay_ns / 1e6); set("delay-range", d.delay_ns / 1e6);
    set("jitter", d.jitter_ns / 1e6); set("jitter-range", d.jitter_ns / 1e6);
    set("jitter-dist", d.jitter_dist);
    const loss = d.loss || { model: "none" };
    set("loss-model", loss.model);
    set("loss", loss.model === "random" ? pct(loss.p) : "");
    set("loss-params", loss.model === "gemodel" ? [loss.p, loss.r, loss["1-h"], loss["1-k"]].map(pct).join(",")
      : loss.model === "state" ? [loss.p13, loss.p31, loss.p32, loss.p23, loss.p14].map(pct).join(",") : "");
    $(`${dir}-loss-model`)._show();
    set("duplicate", d.duplicate ? pct(d.duplicate) : "");
    set("reorder", d.reorder ? pct(d.reorder.probability) : "");
    set("reorder-gap", d.reorder && d.reorder.gap ? d.reorder.gap : "");
    set("corrupt", d.corrupt ? pct(d.corrupt) : "");
    if (d.rate_bps) {
      const [v, u] = d.rate_bps % 1e9 === 0 ? [d.rate_bps / 1e9, "gbit"] : d.rate_bps % 1e6 === 0 ? [d.rate_bps / 1e6, "mbit"] : [d.rate_bps / 1e3, "kbit"];
      set("rate", v); set("rate-unit", u);
    } else { set("rate", ""); set("rate-unit", "mbit"); }
    set("limit", d.limit_frames === null ? "" : d.limit_frames);
    set("aqm", d.aqm.discipline); set("ecn", d.aqm.ecn);
    const extra = (d.spec || "").split(/\s+/).filter((w) => w && !COVERED.has(w.split("=")[0]));
    set("extra", extra.join(" "));
  }

  // The spec a direction's form says (the words of --a-to-b).
  function spec(i) {
    const dir = KEYS[i];
    const v = (id) => $(`${dir}-${id}`).value.trim();
    const words = [];
    const num = (id) => v(id) === "" ? 0 : Number(v(id));
    if (num("delay") > 0) words.push(`delay=${v("delay")}ms`);
    if (num("jitter") > 0) words.push(`jitter=${v("jitter")}ms`);
    if (v("jitter-dist") !== "uniform" && v("jitter-dist") !== "table") words.push(`jitter-dist=${v("jitter-dist")}`);
    const model = v("loss-model");
    if (model === "random" && v("loss") !== "") words.push(`loss=${v("loss")}%`);
    if (model === "gemodel" || model === "state") words.push(`loss=${model}:${v("loss-params").split(",").map((x) => x.trim() + "%").join(",")}`);
    if (v("duplicate") !== "") words.push(`duplicate=${v("duplicate")}%`);
    if (v("reorder") !== "") words.push(`reorder=${v("reorder")}%` + (v("reorder-gap") ? `,gap=${v("reorder-gap")}` : ""));
    if (v("corrupt") !== "") words.push(`corrupt=${v("corrupt")}%`);
    if (v("rate") !== "") words.push(`rate=${v("rate")}${v("rate-unit")}`);
    words.push(`limit=${v("limit") === "" ? "none" : v("limit")}`);
    if (v("aqm") !== "tail") words.push(`aqm=${v("aqm")}`);
    if ($(`${dir}-ecn`).checked) words.push("ecn");
    if (v("extra")) words.push(v("extra"));
    return words.join(" ");
  }

  function clearErrors() { document.querySelectorAll(".err").forEach((e) => { e.textContent = ""; }); }
  function showError(dir, key, text) {
    const known = ["delay", "jitter", "jitter-dist", "loss", "duplicate", "reorder", "corrupt", "rate", "limit", "aqm"];
    const k = key === "ecn" ? "aqm" : known.includes(key) ? key : key ? "extra" : "delay";
    const at = $(`err-${dir}-${k}`);
    if (at) at.textContent = text;
  }

  async function apply() {
    clearErrors();
    const body = { a_to_b: spec(0), b_to_a: spec(1) };
    const r = await call("POST", "/api/apply", body);
    if (r.status === 200) { dirty = false; $("apply-result").textContent = "applied to both directions"; message(""); await poll(true); return; }
    $("apply-result").textContent = "refused: nothing changed";
    if (r.json && r.json.errors) {
      for (const [dir, e] of Object.entries(r.json.errors)) {
        if (KEYS.includes(dir)) showError(dir, e.key, e.message);
        else message(e.message);
      }
    } else message(r.text);
  }

  async function oneShot(body, errId) {
    if (errId) $(errId).textContent = "";
    const r = await call("POST", "/api/action", body);
    if (r.status !== 200) {
      const e = r.json && r.json.errors && r.json.errors.action;
      if (errId && e) $(errId).textContent = e.message; else message(r.json ? JSON.stringify(r.json) : r.text);
    }
    await poll(true);
  }

  // --- drawing ----------------------------------------------------------------------------
  function drawState(st) {
    $("title").textContent = st.title;
    const o = st.overlay;
    const status = $("status");
    if (o && (o.kind === "cable" || o.kind === "outage")) { status.textContent = o.kind === "cable" ? "cable pulled" : "outage"; status.className = "pill bad"; }
    else if (o && o.kind === "flap") { status.textContent = "flapping"; status.className = "pill bad"; }
    else if (o) { status.textContent = "lag spike"; status.className = "pill warn"; }
    else { status.textContent = "running"; status.className = "pill"; }
    $("clock").textContent = st.running_s === null ? "" : `${st.running_s.toFixed(1)} s`;
    $("cable").textContent = o && o.kind === "cable" ? "Put the cable back" : "Pull the cable";
    $("overlay").textContent = !o ? "no one-shot in force"
      : o.kind === "cable" ? `cable pulled ${o.for_s.toFixed(1)} s ago: every frame is lost`
      : o.kind === "spike" ? `lag spike: +${D(o.delay_ns)}, ${o.left_s.toFixed(1)} s left`
      : o.kind === "flap" ? `flapping (${o.event})` + (o.left_s === null ? "" : `, ${o.left_s.toFixed(1)} s left`)
      : `outage: every frame lost, ${o.left_s.toFixed(1)} s left`;
    st.directions.forEach((d, i) => {
      $(`${KEYS[i]}-in-force`).textContent = "in force: " + (d.in_force.spec || "(no impairment)") + (d.rules ? `  (+${d.rules} per-flow rules, read-only)` : "");
      if (!dirty) fill(i, d.set);
    });
    if (st.totals) {
      const thead = $("totals").tHead, tbody = $("totals").tBodies[0];
      thead.replaceChildren(tr(["", st.directions[0].name, st.directions[1].name], "th"));
      const rows = [["arrived", (t) => t.arrived], ["sent", (t) => t.sent], ["queued now", (t) => t.queue_frames]];
      for (const c of st.causes) rows.push([`dropped: ${c}`, (t) => t.drops[c]]);
      tbody.replaceChildren(...rows.map(([n, f]) => tr([n, String(f(st.totals[0])), String(f(st.totals[1]))])));
      tbody.querySelectorAll("td").forEach((td) => { td.className = "num"; });
    }
    const log = $("log").tBodies[0];
    log.replaceChildren(...st.changes.slice().reverse().map((c) =>
      tr([c.at_s.toFixed(3), c.direction, c.by, (c.spec || "(no impairment)") + (c.refused ? `  — refused: ${c.refused}` : "")])));
  }
  function tr(cells, tag) {
    const row = document.createElement("tr");
    cells.forEach((c) => { const td = document.createElement(tag || "td"); td.textContent = c; row.appendChild(td); });
    return row;
  }

  function drawCharts() {
    if (!state) return;
    const names = state.directions.map((d) => d.name);
    const by = (f) => KEYS.map((k, i) => ({ name: names[i], points: series.map((p) => [p.t_s, f(p[k])]) }));
    const x = { label: "emulator time (s)", fmt: (t) => SI(t) };
    const last = series[series.length - 1];
    const readout = (id, f) => { $(id).textContent = last ? KEYS.map((k, i) => `${names[i]}: ${f(last[k])}`).join("   ") : "waiting for the first second"; };
    Charts.lines($("c-fps"), { series: by((d) => d.frames_per_s), x, y: { label: "frames/s", fmt: (v) => SI(v) } });
    readout("r-fps", (d) => `${SI(d.frames_per_s)} frames/s sent, ${SI(d.arrived_per_s)} arrived`);
    Charts.lines($("c-bps"), { series: by((d) => d.bits_per_s), x, y: { label: "bit/s", fmt: (v) => SI(v, "b/s") } });
    readout("r-bps", (d) => SI(d.bits_per_s, "bit/s"));
    const drops = [];
    KEYS.forEach((k, i) => state.causes.forEach((c) => {
      if (series.some((p) => p[k].drops[c] > 0)) drops.push({ name: `${names[i]} ${c}`, dash: i === 1, points: series.map((p) => [p.t_s, p[k].drops[c]]) });
    }));
    Charts.lines($("c-drops"), { series: drops, x, y: { label: "frames/s", fmt: (v) => SI(v) }, empty: "no drops" });
    readout("r-drops", (d) => state.causes.filter((c) => d.drops[c] > 0).map((c) => `${c} ${d.drops[c]}`).join(", ") || "none");
    Charts.lines($("c-queue"), { series: by((d) => d.queue_frames), x, y: { label: "frames", fmt: (v) => SI(v) } });
    readout("r-queue", (d) => `${d.queue_frames} frames, ${SI(d.queue_bytes, "B")}`);
    Charts.lines($("c-sojourn"), { series: by((d) => d.sojourn ? d.sojourn.p99_ns : null), x, y: { label: "sojourn p99", fmt: D }, empty: "no queue: the link has no rate" });
    readout("r-sojourn", (d) => d.sojourn ? `p50 ${D(d.sojourn.p50_ns)}, p99 ${D(d.sojourn.p99_ns)}` : "no queue");
    const rel = [];
    KEYS.forEach((k, i) => {
      rel.push({ name: `${names[i]} p50`, dash: false, points: series.map((p) => [p.t_s, p[k].release.p50_ns]) });
      rel.push({ name: `${names[i]} p99`, dash: true, points: series.map((p) => [p.t_s, p[k].release.p99_ns]) });
    });
    Charts.lines($("c-release"), { series: rel, x, y: { label: "release error", fmt: D, log: true }, empty: "no frames released yet" });
    readout("r-release", (d) => d.release.count ? `p50 ${D(d.release.p50_ns)}, p99 ${D(d.release.p99_ns)}` : "no frames");
  }

  async function poll(now) {
    try {
      const r = await call("GET", `/api/state?since=${seq}${presets.length ? "" : "&presets=1"}`);
      if (r.status !== 200) { message(`the panel answered ${r.status}: ${r.text}`); return; }
      const st = r.json;
      if (st.presets) loadPresets(st.presets);
      if (!formBuilt) buildForm(st);
      state = st;
      for (const p of st.series) series.push(p);
      if (series.length > 300) series.splice(0, series.length - 300);
      if (series.length) seq = series[series.length - 1].seq;
      // The text twice a second; the charts only when a point came (once a second) or the
      // window changed: a page left open costs its browser little.
      const text = JSON.stringify([st.directions, st.overlay, st.changes.length, st.totals, st.running_s | 0]);
      if (text !== lastText) { drawState(st); lastText = text; }
      if (st.series.length || !charted) { drawCharts(); charted = true; }
      if (!now && $("message").textContent.startsWith("latlab is not answering")) message("");
    } catch (e) {
      message("latlab is not answering (" + e.message + "): the link it ran has ended");
    }
  }
  function loadPresets(list) {
    presets = list;
    const sel = $("preset");
    for (const p of list) { const o = document.createElement("option"); o.value = p.name; o.textContent = `${p.name}: ${p.about}`; sel.appendChild(o); }
  }

  $("preset").addEventListener("change", () => {
    const p = presets.find((x) => x.name === $("preset").value);
    $("preset-source").textContent = p ? `source: ${p.source}` : "";
    if (!p) return;
    fill(0, p.a_to_b); fill(1, p.b_to_a); edited();
    $("apply-result").textContent = `form filled from ${p.name}: apply to use it`;
  });
  $("apply").addEventListener("click", apply);
  $("revert").addEventListener("click", () => { dirty = false; clearErrors(); $("apply-result").textContent = ""; if (state) drawState(state); });
  $("cable").addEventListener("click", () => oneShot({ action: "cable" }));
  $("spike").addEventListener("click", () => oneShot({ action: "spike", delay: `${$("spike-delay").value}ms`, for: `${$("spike-for").value}s` }, "err-spike"));
  $("outage").addEventListener("click", () => oneShot({ action: "outage", for: `${$("outage-for").value}s` }, "err-outage"));
  window.addEventListener("resize", drawCharts);
  poll();
  setInterval(poll, 500);
})();
