#!/usr/bin/env bash
# Instructions of one plan of the reference synthetic snapshots, counted by
# callgrind (only the plan: planner/instructions/src/main.rs), as a Markdown
# table for docs/benchmarks.md. Usage, from the repository root:
#
#   planner/benches/instructions.sh            # 1k, 10k, 100k pods
#   planner/benches/instructions.sh pods=50000,gangs=5000,nodes=10000,offerings=300
#   planner/benches/instructions.sh --update-docs   # the 1k/10k/100k table and the
#                                              # re-plans after one arrival (10k), written
#                                              # into the marked block of docs/benchmarks.md
set -euo pipefail
update_docs=0
if [ "${1:-}" = "--update-docs" ]; then
  update_docs=1
  shift
fi
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-target}"
cargo build --quiet --release -p muster-planner-instructions
bin="$target/release/plan-instructions"
specs=("$@")
if [ ${#specs[@]} -eq 0 ] || [ "$update_docs" = 1 ]; then
  specs=(
    pods=1000,gangs=100,nodes=200,offerings=300
    pods=10000,gangs=1000,nodes=2000,offerings=300
    pods=100000,gangs=10000,nodes=20000,offerings=300
  )
fi
out="$(mktemp)"
table="$(mktemp)"
trap 'rm -f "$out" "$table"' EXIT
{
echo "| snapshot | instructions per plan |"
echo "|---|---:|"
for spec in "${specs[@]}"; do
  valgrind --tool=callgrind --toggle-collect='*measure_one_plan*' \
    --callgrind-out-file="$out" "$bin" "$spec" >/dev/null 2>&1
  n="$(awk '/^(totals|summary):/ {print $2; exit}' "$out")"
  # thousands separators, whatever the locale
  n="$(echo "$n" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/' -e 'ta')"
  printf '| %s | %s |\n' "$spec" "$n"
done
if [ "$update_docs" = 1 ]; then
  # Re-planning with a Planner (planner/src/incremental.rs): after a plan of
  # the 10k snapshot, one gang arrives in queue team-Q; the change and the
  # next plan are counted (the program checks the plan equals a full plan).
  ref=pods=10000,gangs=1000,nodes=2000,offerings=300
  echo
  echo "Incremental, \`$ref\`: one gang arrives (\`synthetic::arrival\`), then the next plan:"
  echo
  echo "| the gang arrives in queue | \`Planner\`: change + plan | tries taken over | \`Replanner\` (the controller's): new snapshot 1 s later | tries taken over |"
  echo "|---|---:|---:|---:|---:|"
  count() { # mode queue -> "instructions|tries"
    local fn="$1" mode="$2" q="$3" reused n
    reused="$(valgrind --tool=callgrind --toggle-collect="*$fn*" \
      --callgrind-out-file="$out" "$bin" "$ref" "$mode=$q" 2>/dev/null | sed -n 's/^tries taken over: //p')"
    n="$(awk '/^(totals|summary):/ {print $2; exit}' "$out")"
    n="$(echo "$n" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/' -e 'ta')"
    echo "$n | $reused"
  }
  # Which queues meet the target of at most 30 million instructions.
  target=30000000
  met() { # "n,nnn | tries" -> 0 when within the target
    local n="${1%% |*}"
    [ "${n//,/}" -le "$target" ]
  }
  # Lowest and highest figure of a list of "n,nnn | tries" cells.
  range_of() {
    printf '%s\n' "$@" | sed 's/ |.*//' | sort -t, -k1,1n -k2,2n -k3,3n -k4,4n \
      | awk 'NR == 1 {lo = $0} {hi = $0} END {print lo " to " hi}'
  }
  planner_met=() planner_missed=() replanner_met=() replanner_missed=()
  planner_cells=() replanner_cells=()
  for q in 0 1 2 3 4 5 6 7; do
    a="$(count measure_one_replan arrive "$q")"
    c="$(count measure_one_cycle cycle "$q")"
    printf '| team-%s | %s | %s |\n' "$q" "$a" "$c"
    planner_cells+=("$a") replanner_cells+=("$c")
    if met "$a"; then planner_met+=("team-$q"); else planner_missed+=("team-$q"); fi
    if met "$c"; then replanner_met+=("team-$q"); else replanner_missed+=("team-$q"); fi
  done
  echo
  echo "At most 30 million instructions: the \`Planner\` in ${planner_met[*]:-none} (missed in ${planner_missed[*]:-none}); the \`Replanner\` in ${replanner_met[*]:-none} (missed in ${replanner_missed[*]:-none}). The \`Planner\` column runs from $(range_of "${planner_cells[@]}"), the \`Replanner\` column from $(range_of "${replanner_cells[@]}")."
  # The same snapshot after its plan was carried out (apply.rs): what the
  # controller plans once the gangs it placed are provisioning or admitted.
  valgrind --tool=callgrind --toggle-collect='*measure_one_plan*' \
    --callgrind-out-file="$out" "$bin" "$ref" steady-full >/dev/null 2>&1
  n="$(awk '/^(totals|summary):/ {print $2; exit}' "$out")"
  n="$(echo "$n" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/' -e 'ta')"
  echo
  echo "After that snapshot's plan is carried out (apply.rs: its gangs provisioning or admitted, the new machines in flight), a full plan costs $n instructions; one gang arriving then, planned by the Replanner 1 s later:"
  echo
  echo "| the gang arrives in queue | instructions (new snapshot + plan) | tries taken over |"
  echo "|---|---:|---:|"
  steady_met=() steady_missed=() steady_cells=()
  for q in 0 1 2 3 4 5 6 7; do
    c="$(count measure_one_cycle steady "$q")"
    printf '| team-%s | %s |\n' "$q" "$c"
    steady_cells+=("$c")
    if met "$c"; then steady_met+=("team-$q"); else steady_missed+=("team-$q"); fi
  done
  echo
  echo "At most 30 million instructions: in ${steady_met[*]:-none} (missed in ${steady_missed[*]:-none}); the column runs from $(range_of "${steady_cells[@]}")."
fi
} > "$table"
if [ "$update_docs" = 1 ]; then
  python3 - "$table" docs/benchmarks.md <<'PY'
import sys
table, doc = sys.argv[1], sys.argv[2]
begin, end = "<!-- BEGIN instructions -->", "<!-- END instructions -->"
text = open(doc, encoding="utf-8").read()
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
body = open(table, encoding="utf-8").read()
open(doc, "w", encoding="utf-8").write(head + begin + "\n" + body + end + tail)
PY
fi
cat "$table"
