// A generator run's live board: polls /api/state twice a second and draws it.
"use strict";
(() => {
  const token = new URLSearchParams(location.search).get("token") || "";
  const $ = (id) => document.getElementById(id);
  const D = Charts.duration;
  let last = null;

  function row(cells, nums) {
    const tr = document.createElement("tr");
    cells.forEach((c, i) => {
      const td = document.createElement(i === 0 ? "th" : "td");
      td.textContent = c;
      if (nums && i > 0) td.className = "num";
      tr.appendChild(td);
    });
    return tr;
  }
  function fill(tbody, rows) {
    tbody.replaceChildren(...rows.map((r) => row(r, true)));
  }
  function message(text) { $("message").textContent = text || ""; }

  function draw(s) {
    $("label").textContent = s.label;
    const status = $("status");
    if (s.error) { status.textContent = "failed"; status.className = "pill bad"; }
    else if (s.done) { status.textContent = "finished"; status.className = "pill warn"; }
    else { status.textContent = "running"; status.className = "pill"; }
    $("clock").textContent = `${s.elapsed_s.toFixed(1)} s of ${s.total_s.toFixed(1)} s`;
    if (s.error) message("the run failed: " + s.error);
    fill($("percentiles").tBodies[0], s.percentiles.map((p) => p.value_ns !== undefined
      ? [p.label, D(p.value_ns), `${D(p.low_ns)} – ${D(p.high_ns)}`]
      : [p.label, "too few samples", `${p.samples} of ${p.needed} needed`]));
    $("samples").textContent = `${s.samples} answers${s.done ? "" : " in the seconds completed so far"}; min ${D(s.min_ns)}, max ${D(s.max_ns)}`;
    const unanswered = Math.max(0, s.sent - s.received);
    fill($("counts").tBodies[0], [
      ["sent", String(s.sent)],
      ["answered (measured)", String(s.received)],
      ["not answered yet or lost", String(unanswered)],
      ["reordered", String(s.reordered)],
      ["duplicated", String(s.duplicated)],
      ["not answers (malformed, other runs)", String(s.not_answers)],
      ["sender lag p99", D(s.send_lag_p99_ns)],
      ["sender lag max", D(s.send_lag_max_ns)],
    ]);
    const ccdf = s.ccdf.filter(([, f]) => f > 0);
    Charts.lines($("ccdf"), {
      title: "CCDF",
      series: [{ name: "fraction slower", points: ccdf }],
      x: { label: "latency", fmt: D, log: true },
      y: { label: "fraction slower", log: true, fmt: (f) => f >= 0.01 ? Charts.percent(f) : f.toExponential(0) },
      empty: "no answers yet",
    });
    const tail = s.percentiles.filter((p) => p.value_ns !== undefined).slice(-1)[0];
    $("ccdf-readout").textContent = tail ? `deepest bounded percentile: ${tail.label} = ${D(tail.value_ns)}` : "";
    const pick = (i) => s.series.map((p) => [p[0], p[i]]);
    Charts.lines($("series"), {
      title: "latency per second",
      series: [{ name: "p50", points: pick(2) }, { name: "p99", points: pick(3) }, { name: "p99.9", points: pick(4) }],
      x: { label: "time since the first probe (s)", fmt: (t) => Charts.si(t) },
      y: { label: "latency", fmt: D, log: true },
      empty: "the first second is not over yet",
    });
    const lp = s.series[s.series.length - 1];
    $("series-readout").textContent = lp ? `last second: p50 ${D(lp[2])}, p99 ${D(lp[3])}, p99.9 ${D(lp[4])}` : "";
    Charts.lines($("rate"), {
      title: "answers per second",
      series: [{ name: "answers/s", points: pick(1) }],
      x: { label: "time since the first probe (s)", fmt: (t) => Charts.si(t) },
      y: { label: "answers/s", fmt: (v) => Charts.si(v) },
    });
    $("rate-readout").textContent = lp ? `last second: ${Charts.si(lp[1])} answers/s` : "";
    if (s.done && !s.error) {
      $("final-card").hidden = false;
      const f = s.final || {};
      const lat = f.latency_ns || {};
      const rows = [["sent", String(f.sent ?? "–")], ["received", String(f.received ?? "–")],
        ["lost", String(f.lost ?? "–")], ["reordered", String(f.reordered ?? "–")]];
      for (const k of ["p50", "p99", "p99_9", "p99_99", "max"]) if (lat[k] !== undefined && lat[k] !== null) rows.push([k.replace("_", "."), D(lat[k])]);
      fill($("final").tBodies[0], rows);
      $("files").replaceChildren(...s.files.map((name) => {
        const li = document.createElement("li");
        const a = document.createElement("a");
        a.textContent = name;
        a.href = "#";
        a.addEventListener("click", (e) => { e.preventDefault(); openFile(name); });
        li.appendChild(a);
        return li;
      }));
    }
  }

  async function openFile(name) {
    const r = await fetch("/api/file?name=" + encodeURIComponent(name), { headers: { "X-Latlab-Token": token } });
    const blob = await r.blob();
    window.open(URL.createObjectURL(blob), "_blank");
  }

  async function poll() {
    try {
      const r = await fetch("/api/state", { headers: { "X-Latlab-Token": token } });
      if (!r.ok) { message(`the board answered ${r.status}: ${(await r.text()).trim()}`); return; }
      const fresh = await r.json();
      if (!fresh.error) message("");
      // Drawn again only when something moved (a progress report, an interval, the end).
      const changed = !last || fresh.sent !== last.sent || fresh.intervals !== last.intervals || fresh.done !== last.done;
      last = fresh;
      if (changed) draw(last);
    } catch (e) {
      if (last && last.done) { $("status").textContent = "finished (latlab exited)"; }
      else message("latlab is not answering (" + e.message + ")");
      return "gone";
    }
  }
  async function loop() {
    const gone = await poll();
    setTimeout(loop, gone && last && last.done ? 5000 : 500);
  }
  window.addEventListener("resize", () => last && draw(last));
  loop();
})();
