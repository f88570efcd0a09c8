# shellcheck shell=bash
# Sourced by the command-line tests: a scratch folder $tmp (removed on exit), pass / fail
# counters with ok and bad, run (a command whose stdout is kept as JSON), expect_error (a refusal)
# and finish (the summary line and the exit status).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
run() {  # run <log name> <command...>: stdout to $tmp/<name>.json, stderr to $tmp/<name>.err
  local name=$1; shift
  if "$@" >"$tmp/$name.json" 2>"$tmp/$name.err"; then ok; else bad "$name exited $?: $(tail -3 "$tmp/$name.err")"; fi
}
# expect_error <stderr fragment> <command...>: exit code 2, one stderr line containing the fragment.
expect_error() {
  local frag=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines; lines=$(wc -l <"$tmp/err")
  if [ $rc -ne 2 ]; then bad "$* -> exit $rc (want 2): $(cat "$tmp/err")"; return; fi
  if [ "$lines" -ne 1 ]; then bad "$* -> $lines stderr lines (want 1): $(cat "$tmp/err")"; return; fi
  grep -qF -- "$frag" "$tmp/err" || { bad "$* -> '$(cat "$tmp/err")' lacks '$frag'"; return; }
  ok
}
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
