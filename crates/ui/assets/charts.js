// latlab's charts: plain SVG, no library. Each chart has axes with units, ticks whose labels
// do not overlap, a legend, and (by the caller) its latest values as text beside it.
"use strict";

const Charts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const PALETTE = ["#1f6feb", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7ea4", "#57606a"];

  function el(name, attrs, text) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // Numbers as people read them: 1.23k, 45.6M.
  function si(x, unit) {
    if (x === null || x === undefined || !isFinite(x)) return "–";
    const a = Math.abs(x);
    const steps = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (const [f, p] of steps) if (a >= f) return trim(x / f) + " " + p + (unit || "");
    return trim(x) + (unit ? " " + unit : "");
  }
  function trim(x) {
    const a = Math.abs(x);
    const d = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
    return Number(x.toFixed(d)).toString();
  }
  // Nanoseconds as a duration: 850 ns, 12.3 µs, 4.56 ms, 1.2 s.
  function duration(ns) {
    if (ns === null || ns === undefined || !isFinite(ns)) return "–";
    const a = Math.abs(ns);
    if (a >= 1e9) return trim(ns / 1e9) + " s";
    if (a >= 1e6) return trim(ns / 1e6) + " ms";
    if (a >= 1e3) return trim(ns / 1e3) + " µs";
    return trim(ns) + " ns";
  }
  function percent(f) {
    if (f === null || f === undefined || !isFinite(f)) return "–";
    return trim(f * 100) + " %";
  }

  function linearTicks(lo, hi, count) {
    if (!(hi > lo)) hi = lo + 1;
    const raw = (hi - lo) / Math.max(1, count);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
    const ticks = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
    return { ticks, lo: Math.min(lo, ticks[0] ?? lo), hi: Math.max(hi, ticks[ticks.length - 1] ?? hi) };
  }
  function logTicks(lo, hi) {
    const a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
    const ticks = [];
    const every = Math.max(1, Math.ceil((b - a) / 6));
    for (let e = a; e <= b; e += every) ticks.push(Math.pow(10, e));
    return { ticks, lo: Math.pow(10, a), hi: Math.pow(10, b) };
  }

  // Draws `opts.series` ([{name, points: [[x, y]], color, dash}]) into the <svg> `svg`.
  // opts.x / opts.y: {label, fmt, log, min, max, zero}. Points with a null y are gaps.
  function lines(svg, opts) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const box = svg.getBoundingClientRect();
    const W = Math.max(280, box.width || 560), H = Math.max(140, box.height || 190);
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const m = { l: 58, r: 22, t: 8, b: 34 };
    const xs = [], ys = [];
    for (const s of opts.series) for (const [x, y] of s.points) {
      if (x !== null && isFinite(x)) xs.push(x);
      if (y !== null && isFinite(y) && (!opts.y.log || y > 0)) ys.push(y);
    }
    const title = el("title", {}, opts.title || "");
    svg.appendChild(title);
    if (!xs.length || !ys.length) {
      svg.appendChild(el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", fill: "#59636e", "font-size": 12 },
        opts.empty || "no data yet"));
      return;
    }
    let xlo = opts.x.min ?? Math.min(...xs), xhi = opts.x.max ?? Math.max(...xs);
    let ylo = opts.y.min ?? Math.min(...ys), yhi = opts.y.max ?? Math.max(...ys);
    if (!opts.y.log && opts.y.zero !== false) ylo = Math.min(0, ylo);
    if (yhi === ylo) yhi = ylo + (opts.y.log ? ylo * 9 : 1);
    if (xhi === xlo) xhi = xlo + (opts.x.log ? xlo * 9 : 1);
    const xt = opts.x.log ? logTicks(xlo, xhi) : linearTicks(xlo, xhi, Math.floor((W - m.l) / 90));
    const yt = opts.y.log ? logTicks(ylo, yhi) : linearTicks(ylo, yhi, Math.floor((H - m.t - m.b) / 36));
    if (!opts.x.log && opts.x.min === undefined) { xlo = xt.lo; }
    if (!opts.x.log && opts.x.max === undefined) { xhi = xt.hi; }
    if (opts.x.log) { xlo = xt.lo; xhi = xt.hi; }
    ylo = yt.lo; yhi = yt.hi;
    const fx = opts.x.log
      ? (x) => m.l + (Math.log10(x) - Math.log10(xlo)) / (Math.log10(xhi) - Math.log10(xlo)) * (W - m.l - m.r)
      : (x) => m.l + (x - xlo) / (xhi - xlo) * (W - m.l - m.r);
    const fy = opts.y.log
      ? (y) => H - m.b - (Math.log10(y) - Math.log10(ylo)) / (Math.log10(yhi) - Math.log10(ylo)) * (H - m.t - m.b)
      : (y) => H - m.b - (y - ylo) / (yhi - ylo) * (H - m.t - m.b);
    const g = el("g", { "font-size": 11, fill: "#59636e" });
    svg.appendChild(g);
    let lastRight = -Infinity;
    for (const t of xt.ticks) {
      if (t < xlo - 1e-12 || t > xhi + 1e-12) continue;
      const x = fx(t);
      g.appendChild(el("line", { x1: x, x2: x, y1: m.t, y2: H - m.b, stroke: "#eaeef2" }));
      const label = (opts.x.fmt || si)(t);
      const width = label.length * 6.2;
      if (x - width / 2 > lastRight + 4) {
        g.appendChild(el("text", { x, y: H - m.b + 13, "text-anchor": "middle" }, label));
        lastRight = x + width / 2;
      }
    }
    for (const t of yt.ticks) {
      const y = fy(t);
      g.appendChild(el("line", { x1: m.l, x2: W - m.r, y1: y, y2: y, stroke: "#eaeef2" }));
      g.appendChild(el("text", { x: m.l - 4, y: y + 4, "text-anchor": "end" }, (opts.y.fmt || si)(t)));
    }
    g.appendChild(el("rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, fill: "none", stroke: "#d1d9e0" }));
    g.appendChild(el("text", { x: m.l + (W - m.l - m.r) / 2, y: H - 4, "text-anchor": "middle" }, opts.x.label));
    g.appendChild(el("text", { x: 11, y: m.t + (H - m.t - m.b) / 2, "text-anchor": "middle",
      transform: `rotate(-90 11 ${m.t + (H - m.t - m.b) / 2})` }, opts.y.label));
    const legend = el("g", { "font-size": 11 });
    let lx = m.l + 6;
    opts.series.forEach((s, i) => {
      const color = s.color || PALETTE[i % PALETTE.length];
      let d = "", pen = false;
      for (const [x, y] of s.points) {
        const ok = y !== null && isFinite(y) && (!opts.y.log || y > 0) && (!opts.x.log || x > 0);
        if (!ok) { pen = false; continue; }
        d += (pen ? "L" : "M") + fx(x).toFixed(1) + "," + fy(y).toFixed(1);
        pen = true;
      }
      const path = el("path", { d, fill: "none", stroke: color, "stroke-width": 1.8 });
      if (s.dash) path.setAttribute("stroke-dasharray", "5 3");
      if (opts.step) path.setAttribute("stroke-linejoin", "miter");
      svg.appendChild(path);
      if (s.points.length === 1 || opts.dots) {
        for (const [x, y] of s.points) if (y !== null && isFinite(y) && (!opts.y.log || y > 0))
          svg.appendChild(el("circle", { cx: fx(x), cy: fy(y), r: 2.5, fill: color }));
      }
      if (s.name) {
        legend.appendChild(el("rect", { x: lx, y: m.t + 5, width: 10, height: 3, fill: color }));
        const text = el("text", { x: lx + 13, y: m.t + 10, fill: "#1f2328" }, s.name);
        legend.appendChild(text);
        lx += 13 + s.name.length * 6.2 + 12;
      }
    });
    svg.appendChild(legend);
  }

  return { lines, si, duration, percent, PALETTE };
})();
