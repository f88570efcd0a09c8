#!/usr/bin/env bash
# Fault drills on a running job (docs/reliability.md): one rank of `mpirun -n 3 adgnn train` is
# stopped with SIGSTOP once training runs. With ADGNN_COMM_TIMEOUT=3 the job must end within the
# timeout, the roll call's grace and a margin, with a non-zero exit, a message naming rank 1 as
# the stopped rank (a roll call's "did not answer" when the others wait in a collective, the
# pending receive from it when they wait in a halo exchange), and no crash (heap corruption,
# segfault) on any rank. tests/comm/test_conformance.cpp covers the collective case deterministically.
# Usage: test_rank_faults.sh <adgnn binary> ["extra mpirun flags"]
set -u
adgnn=$1
mpirun_extra=${2:-}
# shellcheck source=harness.sh
source "$(dirname "$0")/harness.sh"
timeout_s=3

run gen "$adgnn" data generate --nodes 4000 --classes 4 --avg-degree 6 --features 32 --seed 5 -o "$tmp/g.h5"

# rank_pid <marker> <rank>: the PID of that rank of the job started with ADGNN_DRILL=<marker>.
rank_pid() {
  local f pid
  for f in /proc/[0-9]*/environ; do
    pid=${f#/proc/}; pid=${pid%/environ}
    if tr '\0' '\n' <"$f" 2>/dev/null | grep -qx "ADGNN_DRILL=$1" &&
       tr '\0' '\n' <"$f" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$pid"; return 0
    fi
  done
  return 1
}

# drill <name>
drill() {
  local name=$1 marker="$$-$1" pid=""
  ADGNN_DRILL=$marker ADGNN_COMM_TIMEOUT=$timeout_s mpirun -n 3 $mpirun_extra "$adgnn" train "$tmp/g.h5" \
    --epochs 1000000 --hidden 8 --layers 2 --model gcn --variant ad_fast --threads 1 --no-progress \
    --metrics "$tmp/$name.jsonl" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  local job=$!
  # Wait until the job trains (a metrics line) and rank 1 is found.
  for _ in $(seq 1 600); do
    if [ -s "$tmp/$name.jsonl" ]; then pid=$(rank_pid "$marker" 1) && break; fi
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$pid" ]; then
    bad "$name: the job did not start training or rank 1 was not found: $(tail -3 "$tmp/$name.err")"
    kill "$job" 2>/dev/null; wait "$job" 2>/dev/null; return
  fi
  local t0=$SECONDS
  kill -STOP "$pid"
  # The job must end on its own; after a generous bound it is killed and the drill fails.
  local limit=$((timeout_s + 5 + 20)) rc
  for _ in $(seq 1 $((limit * 10))); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2>/dev/null; then
    bad "$name: the job still runs $limit s after rank 1 was stopped"
    kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null
  fi
  wait "$job"; rc=$?
  kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null
  echo "$name: ended ${rc} after $((SECONDS - t0)) s"
  [ "$rc" -ne 0 ] && ok || bad "$name: exit 0 with a stopped rank"
  if grep -Eiq 'corruption|double free|segmentation|signal 6|signal 11|core dumped|Aborted \(' "$tmp/$name.err"; then
    bad "$name: a rank crashed: $(grep -Ei -m2 'corruption|double free|segmentation|signal' "$tmp/$name.err")"
  else ok; fi
  grep -q "timed out after $timeout_s s" "$tmp/$name.err" && ok || bad "$name: no timeout message: $(head -c 600 "$tmp/$name.err")"
  grep -Eq "roll call: rank 1 on host [^ ]+ did not answer|still waiting for .*(MPI_Irecv of [0-9]+ rows from|MPI_Isend of [0-9]+ rows to) rank 1" \
    "$tmp/$name.err" && ok || bad "$name: rank 1 not named: $(head -c 800 "$tmp/$name.err")"
  grep "adgnn: error" "$tmp/$name.err"
}

drill stopped
finish
