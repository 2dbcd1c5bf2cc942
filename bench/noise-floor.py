#!/usr/bin/env python3
"""The reading and the report of bench/noise-floor.sh.

  noise-floor.py row NAME KIND FILE... --load PCT --steal-ms MS   one JSON line from a
      measurement's outputs (KIND: cyclictest, tsc_gaps, emu, sockperf, latlab)
  noise-floor.py report ROWS --date … --commit … --kernel … --command … --cpus N --secs S
      --limit-secs S   the markdown report from those lines

Every figure is in µs. A value that is missing from a tool's output is null in the row and `-`
in the table, never a guess."""
import argparse
import json
import math
import re
import sys


def us(ns):
    return None if ns is None else ns / 1000.0


def cyclictest(path):
    """Percentiles from cyclictest's histogram (-h: one line a µs, `BUCKET COUNT`), its max
    and overflows (samples past the histogram's last bucket)."""
    text = open(path, errors="replace").read()
    buckets = [(int(b), int(n)) for b, n in re.findall(r"^(\d+)\s+(\d+)\s*$", text, re.M)]
    field = lambda name: re.search(r"^# %s:\s+(\d+)" % name, text, re.M)
    overflows = int(field("Histogram Overflows").group(1)) if field("Histogram Overflows") else 0
    total = sum(n for _, n in buckets) + overflows
    top = buckets[-1][0] if buckets else 0

    past = []

    def pct(key, q):
        if total == 0:
            return None
        rank, seen = max(1, math.ceil(q * total)), 0
        for b, n in buckets:
            seen += n
            if seen >= rank:
                return float(b)
        past.append(key)  # only "over its last bucket" is known
        return None

    mx = field("Max Latencies")
    return {
        "p50_us": pct("p50_us", 0.50),
        "p99_us": pct("p99_us", 0.99),
        "p99_9_us": pct("p99_9_us", 0.999),
        "p99_99_us": pct("p99_99_us", 0.9999),
        "past_histogram": past,
        "max_us": float(mx.group(1)) if mx else None,
        "samples": total,
        "overflows": overflows,
        "histogram_top_us": top,
    }


def tsc_gaps(path):
    j = json.load(open(path))
    return {
        "p50_us": us(j["p50_ns"]),
        "p99_us": us(j["p99_ns"]),
        "p99_9_us": us(j["p99_9_ns"]),
        "p99_99_us": us(j["p99_99_ns"]),
        "max_us": us(j["max_ns"]),
        "samples": j["gaps"],
        "over_10us": j["over_10us"],
        "over_10us_total_us": us(j["over_10us_total_ns"]),
        "stalled_pct": 100.0 * j["over_10us_total_ns"] / (j["seconds"] * 1e9),
        "involuntary_switches": j["involuntary_switches"],
        "wait_p99_us": us(j["wait_p99_ns"]) if "wait_p99_ns" in j else None,
        "wait_p99_9_us": us(j["wait_p99_9_ns"]) if "wait_p99_9_ns" in j else None,
    }


def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return None


def stalls(report):
    h = (report or {}).get("host_stalls")
    if not h:
        return None
    out = {k: h.get(k) for k in ("over_10us", "over_100us", "over_1ms", "longest_ns",
                                 "total_ns", "observed_s", "source")}
    seen = out["observed_s"] or 0
    out["stalled_pct"] = 100.0 * (out["total_ns"] or 0) / (seen * 1e9) if seen else None
    return out


def placement(report):
    p = (report or {}).get("placement") or {}
    if not p:
        return None
    cpu = p.get("cpu")
    return "%s%s%s" % (p.get("poll", "?"), "" if cpu is None else "@%d" % cpu,
                       " rt" if p.get("realtime") else "")


def emu(emu_path, gen_path, echo_path):
    e, g, r = load(emu_path), load(gen_path), load(echo_path)
    out = {"error": None if e and g else "emu or gen wrote no JSON"}
    for d in ("a_to_b", "b_to_a"):
        rel = ((e or {}).get(d) or {}).get("release_error_ns") or {}
        out[d] = {"p50_us": us(rel.get("p50")), "p99_us": us(rel.get("p99")),
                  "p99_9_us": us(rel.get("p99_9")), "max_us": us(rel.get("max")),
                  "count": rel.get("count")}
    out["emu_stalls"] = stalls(e)
    out["gen_stalls"] = stalls(g)
    out["echo_stalls"] = stalls(r)
    out["placement"] = "%s / %s / %s" % (placement(e), placement(r), placement(g))
    out["contention"] = [c.get("note", "") for c in (e or {}).get("contention") or []]
    cpu = (e or {}).get("cpu") or {}
    out["cores"] = cpu.get("cores")
    out["send_pct"] = (100.0 * cpu["send_ns"] / cpu["elapsed_ns"]
                       if cpu.get("send_ns") is not None and cpu.get("elapsed_ns") else None)
    if g:
        out["answered_pct"] = 100.0 * g["received"] / max(g["sent"], 1)
        out["rtt_p50_us"] = us(g["latency_ns"].get("p50"))
    return out


def sockperf(path):
    """sockperf ping-pong's figures: half the round trip ("latency"), µs."""
    text = open(path, errors="replace").read()
    pct = lambda label: re.search(r"percentile %s = +([0-9.]+)" % re.escape(label), text)
    val = lambda m: float(m.group(1)) if m else None
    avg = re.search(r"avg-latency=([0-9.]+)", text)
    mx = re.search(r"<MAX> observation = +([0-9.]+)", text)
    valid = re.search(r"\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=(\d+); "
                      r"ReceivedMessages=(\d+)", text)
    return {
        "p50_us": val(pct("50.000")),
        "p99_us": val(pct("99.000")),
        "p99_9_us": val(pct("99.900")),
        "max_us": val(mx),
        "avg_us": val(avg),
        "samples": int(valid.group(3)) if valid else None,
        "error": None if pct("50.000") else "no percentiles in its output",
    }


def latlab(gen_path, echo_path):
    g, r = load(gen_path), load(echo_path)
    if not g:
        return {"error": "gen wrote no JSON"}
    half = lambda key: None if g[key].get("p50") is None else g[key]["p50"] / 2000.0
    fwd, back = g.get("forward_ns") or {}, g.get("return_ns") or {}
    return {
        "forward_p50_us": us(fwd.get("p50")),
        "forward_p99_us": us(fwd.get("p99")),
        "return_p50_us": us(back.get("p50")),
        "half_rtt_actual_p50_us": half("latency_from_actual_send_ns"),
        "half_rtt_intended_p50_us": half("latency_ns"),
        "rtt_actual_p99_us": us(g["latency_from_actual_send_ns"].get("p99")),
        "samples": g.get("received"),
        "lost": g.get("lost"),
        "placement": "%s / %s" % (placement(r), placement(g)),
        "gen_stalls": stalls(g),
        "echo_stalls": stalls(r),
        "error": None,
    }


KINDS = {"cyclictest": cyclictest, "tsc_gaps": tsc_gaps, "emu": emu, "sockperf": sockperf,
         "latlab": latlab}


def f(v, digits=1):
    return "-" if v is None else "%.*f" % (digits, v)


def ratio(a, b):
    return "-" if a is None or not b else "%.2f" % (a / b)


def stall_text(st):
    if not st:
        return "-"
    longest = st.get("longest_ns") or 0
    return "%s>10µs, %s>100µs, %s>1ms, longest %s µs, lost %s µs in %.1f s (%s%%; %s)" % (
        st["over_10us"], st["over_100us"], st["over_1ms"], f(longest / 1000.0),
        f((st.get("total_ns") or 0) / 1000.0, 0), st.get("observed_s") or 0,
        f(st.get("stalled_pct")), st["source"])


def cell(r, key, digits=1):
    """A percentile, or `>TOP` for one past cyclictest's histogram."""
    if key in r.get("past_histogram", []):
        return ">%s" % r.get("histogram_top_us")
    return f(r.get(key), digits)


def report(a):
    rows = {r["name"]: r for r in map(json.loads, open(a.rows)) if r}
    get = lambda name: rows.get(name) or {}
    cy1k, cy100, tsc = get("cyclictest -i 1000"), get("cyclictest -i 100"), get("tsc_gaps")
    study, dflt = get("emu study plan"), get("emu defaults")
    p = print
    p("# The host's limits beside latlab's figures (noise floor)\n")
    p("- date: %s" % a.date)
    p("- commit: %s" % a.commit)
    p("- kernel: %s, %s CPUs" % (a.kernel, a.cpus))
    p("- command: `%s`\n" % a.command)
    p("One sitting, one point after another; every limit on CPU 1, the CPU the emulator gets. "
      "Figures in µs. `host busy` is how busy both CPUs were in the second before a point "
      "(others' work competes too), `steal` the hypervisor's steal over the point (all CPUs).\n")

    p("## Key ratios\n")
    p("tsc_gaps' percentiles count gaps (hundreds of millions, nearly all one clock read); a "
      "frame's release error samples time, and a frame meets a stall in proportion to the time "
      "stalls take, which the `time in stalls` rows compare (a loop's own gaps of 10 µs or more "
      "include its receive calls' work, tsc_gaps' none; the emulator's sends are timed apart, "
      "`sends %`, and are not its stalls). tsc_gaps' `wait` samples time as a "
      "frame's departure does: the wait of a deadline at a moment drawn uniformly from its "
      "spin, the rest of the gap it falls in.\n")
    p("| ratio | latlab | limit | ratio |")
    p("|---|---:|---:|---:|")
    floor = None if tsc.get("p99_us") is None else tsc["p99_us"] + 5.0
    p("| emulator release error p99 (a→b), study plan 20 kpps / (TSC-gap p99 + 5 µs) | %s | %s | %s |"
      % (f(study.get("a_to_b", {}).get("p99_us")), f(floor), ratio(study.get("a_to_b", {}).get("p99_us"), floor)))
    wait = None if tsc.get("wait_p99_us") is None else tsc["wait_p99_us"] + 5.0
    p("| emulator release error p99 (a→b), study plan 20 kpps / (TSC-gap wait p99, time-sampled, + 5 µs) | %s | %s | %s |"
      % (f(study.get("a_to_b", {}).get("p99_us")), f(wait), ratio(study.get("a_to_b", {}).get("p99_us"), wait)))
    for name, cy in (("-i 1000", cy1k), ("-i 100", cy100)):
        p("| emulator release error p99 (a→b), defaults 20 kpps / cyclictest %s p99 | %s | %s | %s |"
          % (name, f(dflt.get("a_to_b", {}).get("p99_us")), f(cy.get("p99_us")),
             ratio(dflt.get("a_to_b", {}).get("p99_us"), cy.get("p99_us"))))
    for name, r in (("study plan", study), ("defaults", dflt)):
        st = r.get("emu_stalls") or {}
        p("| time in stalls of 10 µs or more: emulator's loop (%s) / tsc_gaps, %% | %s | %s | %s |"
          % (name, f(st.get("stalled_pct"), 2), f(tsc.get("stalled_pct"), 2),
             ratio(st.get("stalled_pct"), tsc.get("stalled_pct"))))
    for topo in ("loopback", "veth"):
        for rate in ("1000", "10000"):
            l, s = get("%s latlab %s" % (topo, rate)), get("%s sockperf %s" % (topo, rate))
            p("| one-way p50, %s %s/s: latlab RTT/2 from actual send / sockperf p50 | %s | %s | %s |"
              % (topo, rate, f(l.get("half_rtt_actual_p50_us")), f(s.get("p50_us")),
                 ratio(l.get("half_rtt_actual_p50_us"), s.get("p50_us"))))
            p("| one-way p50, %s %s/s: latlab forward_ns p50 / sockperf p50 | %s | %s | %s |"
              % (topo, rate, f(l.get("forward_p50_us")), f(s.get("p50_us")),
                 ratio(l.get("forward_p50_us"), s.get("p50_us"))))

    p("\n## The limits on CPU 1 (%s s each)\n" % a.limit_secs)
    p("| limit | p50 | p99 | p99.9 | p99.99 | max | samples | over 10 µs | host busy | steal ms |")
    p("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for name, r, what in (("cyclictest -i 1000", cy1k, "wake-up latency, SCHED_FIFO 80"),
                          ("cyclictest -i 100", cy100, "wake-up latency, SCHED_FIFO 80"),
                          ("tsc_gaps", tsc, "gap between clock reads, spinning")):
        over = "-"
        if name == "tsc_gaps" and r:
            over = "%s (%s µs together, %s%% of the time; %s involuntary switches; a deadline's wait p99 %s, p99.9 %s)" % (
                r.get("over_10us"), f(r.get("over_10us_total_us"), 0), f(r.get("stalled_pct"), 2),
                r.get("involuntary_switches"), f(r.get("wait_p99_us"), 2), f(r.get("wait_p99_9_us"), 2))
        elif r.get("overflows"):
            over = "%s over the %s µs histogram" % (r["overflows"], r.get("histogram_top_us"))
        d = 3 if name == "tsc_gaps" else 1
        p("| %s (%s) | %s | %s | %s | %s | %s | %s | %s | %s%% | %s |" % (
            name, what, cell(r, "p50_us", d), cell(r, "p99_us", d), cell(r, "p99_9_us", d),
            cell(r, "p99_99_us", d), f(r.get("max_us")), r.get("samples", "-"),
            over, r.get("load", "-"), r.get("steal_ms", "-")))

    p("\n## The emulator, 20k round trips a second (%s s)\n" % a.secs)
    p("Release error = actual − intended departure of every frame, from `emu --json`.\n")
    p("| plan | a→b p50 | a→b p99 | a→b p99.9 | a→b max | b→a p50 | b→a p99 | answered % | RTT p50 | emu / echo / gen | emu cores | emu sends % | host busy | steal ms |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for name, r in (("study plan", study), ("defaults", dflt)):
        ab, ba = r.get("a_to_b", {}), r.get("b_to_a", {})
        p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s%% | %s |" % (
            name, f(ab.get("p50_us")), f(ab.get("p99_us")), f(ab.get("p99_9_us")), f(ab.get("max_us")),
            f(ba.get("p50_us")), f(ba.get("p99_us")), f(r.get("answered_pct"), 2), f(r.get("rtt_p50_us")),
            r.get("placement", "-"), f(r.get("cores"), 2), f(r.get("send_pct"), 1),
            r.get("load", "-"), r.get("steal_ms", "-")))
    p("\n| plan | loop | host_stalls |")
    p("|---|---|---|")
    for name, r in (("study plan", study), ("defaults", dflt)):
        for loop in ("emu", "echo", "gen"):
            p("| %s | %s | %s |" % (name, loop, stall_text(r.get(loop + "_stalls"))))
        if r.get("contention"):
            p("| %s | emu contention notice | %s |" % (name, "; ".join(r["contention"])))

    p("\n## latlab gen/echo at their defaults beside sockperf ping-pong (%s s a point)\n" % a.secs)
    p("sockperf's figures are its own: half the round trip (its \"latency\"), from the actual send. "
      "latlab's one-way figures: `RTT/2` is `latency_from_actual_send_ns` p50 / 2 (measured as "
      "sockperf measures), `forward` is `forward_ns` p50 (intended send time to the echo's "
      "receive stamp, one clock), `return` is `return_ns` p50 (the echo's transmit stamp to "
      "arrival back); `host busy` and `steal` sockperf's / latlab's point.\n")
    p("| topology | rate /s | sockperf p50 | sockperf p99 | sockperf p99.9 | sockperf max | latlab RTT/2 p50 | latlab forward p50 | latlab forward p99 | latlab return p50 | latlab RTT p99 | ratio RTT/2 | ratio forward | echo / gen | host busy | steal ms |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
    for topo in ("loopback", "veth"):
        for rate in ("1000", "10000"):
            l, s = get("%s latlab %s" % (topo, rate)), get("%s sockperf %s" % (topo, rate))
            p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s%% / %s%% | %s / %s |" % (
                topo, rate, f(s.get("p50_us")), f(s.get("p99_us")), f(s.get("p99_9_us")), f(s.get("max_us")),
                f(l.get("half_rtt_actual_p50_us")), f(l.get("forward_p50_us")), f(l.get("forward_p99_us")),
                f(l.get("return_p50_us")), f(l.get("rtt_actual_p99_us")), ratio(l.get("half_rtt_actual_p50_us"), s.get("p50_us")),
                ratio(l.get("forward_p50_us"), s.get("p50_us")), l.get("placement", "-"),
                s.get("load", "-"), l.get("load", "-"), s.get("steal_ms", "-"), l.get("steal_ms", "-")))
    p("\n| topology | rate /s | loop | host_stalls |")
    p("|---|---:|---|---|")
    for topo in ("loopback", "veth"):
        for rate in ("1000", "10000"):
            l = get("%s latlab %s" % (topo, rate))
            for loop in ("echo", "gen"):
                p("| %s | %s | %s | %s |" % (topo, rate, loop, stall_text(l.get(loop + "_stalls"))))
    p("\n## What else ran\n")
    p("Processes of latlab's kind (latlab and its test binaries, peers, compilers) running when "
      "each point began, none of them this script's: a point beside others' tests or builds "
      "measures them too.\n")
    p("| point | others running |")
    p("|---|---|")
    for n, r in rows.items():
        p("| %s | %s |" % (n, r.get("others", "-")))
    errors = ["%s: %s" % (n, r["error"]) for n, r in rows.items() if r.get("error")]
    if errors:
        p("\nNot measured: " + "; ".join(errors))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("row")
    r.add_argument("name")
    r.add_argument("kind", choices=sorted(KINDS))
    r.add_argument("files", nargs="+")
    r.add_argument("--load", type=int)
    r.add_argument("--steal-ms", type=int)
    r.add_argument("--others", default="-")
    t = sub.add_parser("report")
    t.add_argument("rows")
    for k in ("date", "commit", "kernel", "command", "cpus", "secs", "limit_secs"):
        t.add_argument("--" + k.replace("_", "-"), required=True)
    a = ap.parse_args()
    if a.what == "row":
        try:
            out = KINDS[a.kind](*a.files)
        except (OSError, ValueError, KeyError, TypeError) as e:
            out = {"error": "%s: %s" % (a.files[0], e)}
        out.update(name=a.name, kind=a.kind, load=a.load, steal_ms=a.steal_ms, others=a.others)
        print(json.dumps(out))
    else:
        report(a)


if __name__ == "__main__":
    sys.exit(main())
