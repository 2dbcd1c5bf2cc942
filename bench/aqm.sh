#!/usr/bin/env bash
# The queue disciplines' cost, in one sitting:
#   1. the default path (`aqm=tail`): `cargo bench -p latlab-link --bench pipe` built from BASE
#      (a revision before the disciplines, default main's merge-base) and from this tree, run
#      alternately ROUNDS times (default 4; which goes first alternates too), each bench's
#      median per round, then the median of the rounds and the ratio this tree ÷ BASE;
#   2. each discipline's ns per frame at a saturated bottleneck (`--bench aqm`), this tree only.
# Criterion's warm-up and measurement are kept short (0.5 s, 1 s): alternating rounds, not long
# runs, are what tell a change from a busy machine.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-4}
base=${BASE:-$(git merge-base HEAD main)}
here=$PWD
# BASE_DIR: a checkout of BASE kept between runs (its build is reused); otherwise a fresh one.
if [ -n "${BASE_DIR:-}" ]; then
  work=$BASE_DIR
  [ -e "$work/Cargo.toml" ] || { mkdir -p "$work" && git archive "$base" | tar -x -C "$work"; }
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  git archive "$base" | tar -x -C "$work"
fi
bench_bin() { # DIR TARGET -> the path of the pipe bench's executable
  (cd "$1" && CARGO_TARGET_DIR=$2 cargo bench -p latlab-link --bench pipe --no-run 2>&1) |
    sed -n 's/.*(\(.*\/pipe-[0-9a-f]*\)).*/\1/p' | tail -1
}
base_bin=$(bench_bin "$work" "$work/target")
here_bin=$(bench_bin "$here" "$here/target")
case "$base_bin" in /*) ;; *) base_bin=$work/target/${base_bin#target/} ;; esac
case "$here_bin" in /*) ;; *) here_bin=$here/target/${here_bin#target/} ;; esac
# One run: "id median_ns" per bench (criterion's middle estimate, in ns).
run() {
  (cd "$work" && "$1" --bench --warm-up-time 0.5 --measurement-time 1 --noplot 2>/dev/null) |
    awk '/^pipe\// { id = $1 }
         /time:/ { u = ""; for (i = 1; i <= NF; i++) if ($i ~ /^\[[0-9]/) { v = $(i + 2); u = $(i + 3); break }
                   if (u == "µs") v *= 1000; if (u == "ns" || u == "µs") print id, v }'
}
for r in $(seq "$rounds"); do
  # ABBA: odd rounds run BASE first, even rounds this tree first.
  order="base here"; [ $((r % 2)) = 0 ] && order="here base"
  for who in $order; do
    bin=base_bin; [ "$who" = here ] && bin=here_bin
    echo "# $who round $r $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >&2
    run "${!bin}" | sed "s/^/$who /"
  done
done >"$work/runs.txt"
echo "base $base, this tree $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
echo
echo "| bench | base ns (median of $rounds) | this tree ns | ratio | rounds base / this tree |"
echo "|---|---|---|---|---|"
awk '{ v[$1 " " $2] = v[$1 " " $2] " " $3; ids[$2] = 1 }
     function median(list,   a, n, i, j, t) {
       n = split(list, a, " ")
       for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
       return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
     }
     END { for (id in ids) { b = median(v["base " id]); h = median(v["here " id])
             printf "| %s | %.1f | %.1f | %.3f |%s /%s |\n", id, b, h, h / b, v["base " id], v["here " id] } }' \
  "$work/runs.txt" | sort
echo
echo "| discipline (saturated, 1000 B, 8 flows) | ns per frame |"
echo "|---|---|"
cargo bench -q -p latlab-link --bench aqm -- --warm-up-time 0.5 --measurement-time 2 --noplot 2>/dev/null |
  awk '/^aqm\// { id = $1 }
       /time:/ { u = ""; for (i = 1; i <= NF; i++) if ($i ~ /^\[[0-9]/) { v = $(i + 2); u = $(i + 3); break }
                 if (u == "µs") v *= 1000; if (u == "ns" || u == "µs") printf "| %s | %.1f |\n", id, v }'
