import sys, math
def pct(vals, ps=(50, 90, 99, 99.9)):
    v = sorted(vals)
    out = {}
    for p in ps:
        k = max(0, math.ceil(p / 100 * len(v)) - 1)
        out[f"p{p:g}"] = v[k]
    out["mean"] = sum(v) / len(v); out["min"] = v[0]; out["max"] = v[-1]; out["n"] = len(v)
    return out
kind, path = sys.argv[1], sys.argv[2]
vals = []
for line in open(path):
    line = line.strip()
    if kind == "tshark" and line:
        vals.append(float(line.split(",")[0]) * 1e6)
    elif kind == "dnsperf" and line.startswith("> "):
        vals.append(float(line.split()[-1]) * 1e6)
r = pct(vals)
print(" ".join(f"{k}={v:.1f}" if k != "n" else f"n={v}" for k, v in r.items()))
