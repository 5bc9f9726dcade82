#!/usr/bin/env bash
# Loading Keras files with two builds of systolic: bench/load_time.cc built against each build's library (the
# same source: it uses only the public API), run alternately, ROUNDS rounds of REPEATS loads per file. Prints one
# JSON line per run, then a table of the median CPU ms per load (user + system, the HDF5 reading child included)
# and the median wall ms (meaningful on a quiet machine only).
#   bench/load_time.sh OLD_BUILD NEW_BUILD [ROUNDS] [REPEATS] -- FILE[:CONFIG.json]...
# OLD_BUILD, NEW_BUILD: build folders holding libsystolic.so (e.g. a build of main, and build/). A FILE alone is
# loaded with load_model; FILE:CONFIG.json with load_weights into the model CONFIG.json describes.
# The large files: bench/make_load_files.py DIR (ResNet50 as .h5 and .keras).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 4 ]] || { sed -n '2,9p' "$0"; exit 2; }
old=$(realpath "$1"); new=$(realpath "$2"); shift 2
rounds=3; repeats=10
[[ "$1" != "--" ]] && { rounds=$1; shift; }
[[ "$1" != "--" ]] && { repeats=$1; shift; }
[[ "$1" == "--" ]] && shift
work=$(mktemp -d /tmp/systolic-load-time.XXXXXX)
trap 'rm -rf "$work"' EXIT
for b in old new; do
  dir=${!b}
  c++ -std=c++20 -O2 bench/load_time.cc -Iinclude -L"$dir" -lsystolic -Wl,-rpath,"$dir" -o "$work/load_time_$b"
done
for ((r = 1; r <= rounds; r++)); do
  for spec in "$@"; do
    file=${spec%%:*}
    args=("$file"); [[ "$spec" == *:* ]] && args+=("${spec#*:}")
    for b in old new; do
      echo "{\"build\": \"$b\", \"round\": $r, \"result\": $("$work/load_time_$b" "$repeats" "${args[@]}")}" |
        tee -a "$work/results.jsonl"
    done
  done
done
python3 - "$work/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
loads = list(dict.fromkeys((r["result"]["file"], r["result"]["call"]) for r in rows))
print("| file | call | old cpu ms | new cpu ms | new/old | old wall ms | new wall ms |")
print("|---|---|---:|---:|---:|---:|---:|")
for f, call in loads:
    m = {b: [r["result"] for r in rows if r["build"] == b and (r["result"]["file"], r["result"]["call"]) == (f, call)]
         for b in ("old", "new")}
    cpu = {b: statistics.median(x["cpu_ms"] for x in m[b]) for b in m}
    wall = {b: statistics.median(x["wall_ms"] for x in m[b]) for b in m}
    print(f"| {f} | {call} | {cpu['old']:.1f} | {cpu['new']:.1f} | {cpu['new'] / cpu['old']:.2f} "
          f"| {wall['old']:.1f} | {wall['new']:.1f} |")
PY
