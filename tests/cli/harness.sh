# shellcheck shell=bash
# Sourced by the command-line tests: a scratch folder $tmp (removed on exit), pass / fail
# counters with ok and bad, run (a command whose stdout is kept as JSON) and finish (the summary
# line and the exit status).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
run() {  # run <log name> <command...>: stdout to $tmp/<name>.json, stderr to $tmp/<name>.err
  local name=$1; shift
  if "$@" >"$tmp/$name.json" 2>"$tmp/$name.err"; then ok; else bad "$name exited $?: $(tail -3 "$tmp/$name.err")"; fi
}
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
