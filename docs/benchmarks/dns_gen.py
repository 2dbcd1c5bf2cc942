import json, sys
s = json.load(open(sys.argv[1])); l = s["latency_ns"]; p = s["protocol"]
f = lambda k: "-" if l.get(k) is None else f"{l[k]/1e3:.1f}"
print(f"offered={s['offered_pps']:.0f} achieved={s['achieved_pps']:.0f} sent={s['sent']} answered={p['answered']} unanswered={p['unanswered']} unsent={s['unsent']} "
      f"min={f('min')} mean={f('mean')} p50={f('p50')} p90={f('p90')} p99={f('p99')} p99.9={f('p99_9')} max={f('max')} outcomes={p['outcomes']}")
