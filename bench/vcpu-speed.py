#!/usr/bin/env python3
"""How steadily this machine's CPUs run: the same small piece of work (a loop of 50,000
additions, ~5 ms) timed over and over for SECONDS on the CPU it is pinned to
(`taskset -c N bench/vcpu-speed.py [SECONDS]`). On a quiet host every piece takes about the
same; on a guest whose host preempts or slows its vCPUs (which the guest's own steal counter
may not show), some take several times the median. Prints the percentiles of a piece's time
and the share of pieces slower than 1.5x the median, with the guest's context switches away
from this process over the run (voluntary + involuntary), so a slow piece the guest's own
scheduler caused can be told from one the host caused."""
import os
import sys
import time

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 8.0


def switches():
    fields = dict(
        line.split(":", 1) for line in open("/proc/self/status") if "ctxt_switches" in line
    )
    return sum(int(v) for v in fields.values())


before = switches()
pieces = []
end = time.perf_counter() + seconds
while time.perf_counter() < end:
    t = time.perf_counter()
    s = 0
    for i in range(50_000):
        s += i
    pieces.append(time.perf_counter() - t)
after = switches()
d = sorted(pieces)
n = len(d)
med = d[n // 2]
pct = lambda q: d[min(n - 1, int(q * n))] * 1e3
print(
    "cpu %s: %d pieces, p10 %.2f ms, p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms; "
    "%.1f%% slower than 1.5x the median; %d context switches away"
    % (
        ",".join(map(str, sorted(os.sched_getaffinity(0)))),
        n,
        pct(0.10),
        pct(0.50),
        pct(0.90),
        pct(0.99),
        d[-1] * 1e3,
        100.0 * sum(1 for x in d if x > 1.5 * med) / n,
        after - before,
    )
)
