#!/usr/bin/env bash
# Same-run before/after: run one command in an archived "before" commit and in this tree,
# interleaved, and print a markdown table of every number both runs printed with its ratio.
#
#   bash scripts/before_after.sh [-n N] [-t SECONDS] BEFORE -- CMD [ARGS...]
#   (BEFORE: a commit, or a directory holding an extracted tree, e.g. on a machine without .git:
#    git archive 8119e40 | tar -x -C .snap/.before, then BEFORE=.before from inside .snap)
#   e.g. bash scripts/before_after.sh 8119e40 -- python3 benches/cpu.py --reps 10
#        bash scripts/before_after.sh 8119e40 -- python3 benches/gpu.py --gpu --quick --out {out}
#
# Why interleaved in one run: on a shared machine (or a GPU whose clocks drift) only ratios
# measured side by side mean anything. BEFORE (any commit-ish) is `git archive`d into a temp
# dir; "after" is this working tree as it is (uncommitted edits included), or with -a AFTER
# another commit (archived too: a shared worktree's uncommitted edits stay out) or directory. Each of the N rounds
# runs both, alternating which goes first (before/after, then after/before, ...). Each run
# happens in its tree's root with PYTHONPATH=<tree>:$PYTHONPATH (so `import kinac` and
# `python -m kinac` resolve to that tree, not to the installed one), OUT set to its own
# folder, and `{out}` in ARGS replaced by that folder. Everything goes under $OUT (else
# ./before-after-out): before-<i>/ and after-<i>/ (log.txt, exit.txt, files the command
# wrote), each tree's commit in before.txt / after.txt, and table.md (also printed).
# -t SECONDS stops each run after that long (`timeout`): the table then compares the rows both
# runs printed before they were stopped (benches/gpu.py prints each section as it ends).
# The table (scripts/before_after_table.py) pairs lines that read the same with their numbers
# blanked, and gives each number before, after and after/before (the median over rounds).
# Exit status: non-zero if any run failed (all runs happen regardless).
set -uo pipefail
ROUNDS=1
LIMIT=""
AFTER=""
while [ "${1:-}" = "-n" ] || [ "${1:-}" = "-t" ] || [ "${1:-}" = "-a" ]; do
  case "$1" in -n) ROUNDS="$2" ;; -t) LIMIT="$2" ;; -a) AFTER="$2" ;; esac
  shift 2
done
if [ $# -lt 3 ] || [ "$2" != "--" ]; then
  echo "usage: $0 [-n ROUNDS] [-t SECONDS_PER_RUN] [-a AFTER] BEFORE -- CMD [ARGS...]" >&2
  exit 2
fi
BEFORE="$1"
shift 2
HERE="$(cd "$(dirname "$0")/.." && pwd)"
cd "$HERE"
OUTDIR="${OUT:-$HERE/before-after-out}"
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
TEMPS=()
trap 'rm -rf "${TEMPS[@]}"' EXIT
tree_of() {  # tree_of COMMIT|DIR LABEL: sets TREE (a directory as is, a commit archived)
  if [ -d "$1" ]; then  # an extracted tree (a machine without the repository's .git)
    TREE="$(cd "$1" && pwd)"
    echo "tree $TREE" >"$OUTDIR/$2.txt"
    return
  fi
  local commit
  commit="$(git rev-parse --verify --quiet "$1^{commit}")" || {
    echo "before_after: neither a commit nor a directory: $1" >&2
    exit 2
  }
  TREE="$(mktemp -d "${TMPDIR:-/tmp}/kinac-$2-XXXXXX")"
  TEMPS+=("$TREE")
  git archive "$commit" | tar -x -C "$TREE" || { echo "before_after: git archive failed" >&2; exit 2; }
  [ -d "$HERE/.whl" ] && ln -s "$HERE/.whl" "$TREE/.whl"
  echo "$commit $(git log -1 --format=%s "$commit" | cut -c1-100)" >"$OUTDIR/$2.txt"
}
tree_of "$BEFORE" before
TMP="$TREE"
if [ -n "$AFTER" ]; then
  tree_of "$AFTER" after
  HERE_TREE="$TREE"
else
  HERE_TREE="$HERE"
  echo "working tree $HERE at $(git rev-parse --short HEAD 2>/dev/null || echo '?') (uncommitted edits included)" >"$OUTDIR/after.txt"
fi

status=0
run_one() {  # run_one LABEL TREE ROUND
  local label="$1" tree="$2" i="$3" dir="$OUTDIR/$1-$3" args=() a
  rm -rf "$dir" && mkdir -p "$dir"
  for a in "${CMD[@]}"; do args+=("${a//\{out\}/$dir}"); done
  echo "== $label (round $i): ${args[*]}" >&2
  local t0=$EPOCHREALTIME rc
  local limit=()
  [ -n "$LIMIT" ] && limit=(timeout -k 10 "$LIMIT")
  (cd "$tree" && OUT="$dir" PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" "${limit[@]}" "${args[@]}") \
    >"$dir/log.txt" 2>&1
  rc=$?
  echo "$rc $(python3 -c "print(f'{$EPOCHREALTIME - $t0:.1f} s')")" >"$dir/exit.txt"
  tail -n 3 "$dir/log.txt" | sed 's/^/   /' >&2
  [ "$rc" -eq 0 ] || { echo "   exit status $rc" >&2; status=1; }
}
CMD=("$@")
for ((i = 1; i <= ROUNDS; i++)); do
  if ((i % 2)); then
    run_one before "$TMP" "$i"; run_one after "$HERE_TREE" "$i"
  else
    run_one after "$HERE_TREE" "$i"; run_one before "$TMP" "$i"
  fi
done
python3 "$HERE/scripts/before_after_table.py" "$OUTDIR" "$ROUNDS" | tee "$OUTDIR/table.md"
exit $status
