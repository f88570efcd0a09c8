#!/usr/bin/env bash
# Fault drills on the write paths (docs/reliability.md): a file size limit (ulimit -f, which
# fails writes with EFBIG like a full disk fails them with ENOSPC), /dev/full, and, where this
# user may mount, a full and a read-only tmpfs. Every failed write must end with one line naming
# the file and the OS error, exit 2, leave the previous file byte for byte and no temporary file.
# Usage: test_faults.sh <adgnn binary>
set -u
adgnn=$1
# shellcheck source=harness.sh
source "$(dirname "$0")/harness.sh"
train=(train --layers 2 --model gcn --variant ad_fast --threads 1 --no-progress)

# expect_refusal <name> <pattern> <command...>: exit 2 and one stderr line matching pattern.
expect_refusal() {
  local name=$1 pattern=$2; shift 2
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/$name.err")" -eq 1 ] && grep -q -- "$pattern" "$tmp/$name.err"; then ok
  else bad "$name: exit $rc, stderr: $(head -c 400 "$tmp/$name.err")"; fi
}
no_temporaries() {  # no_temporaries <name> <folder>
  if ls "$2" | grep -q '\.tmp'; then bad "$1: temporary files left: $(ls "$2" | grep '\.tmp')"; else ok; fi
}
# limited <KiB> <command...>: the command with RLIMIT_FSIZE set (in a subshell).
limited() { (ulimit -f "$1"; "${@:2}"); }

run gen "$adgnn" data generate --nodes 3000 --classes 4 --avg-degree 6 --features 64 --seed 3 -o "$tmp/g.h5"

# A checkpoint that cannot be written keeps the last good one, which then resumes.
mkdir -p "$tmp/ck"
run first "$adgnn" "${train[@]}" --epochs 1 --hidden 8 "$tmp/g.h5" --checkpoint "$tmp/ck/ck.h5" --checkpoint-every 1
cp "$tmp/ck/ck.h5" "$tmp/good.h5"
ck_kib=$(( $(stat -c %s "$tmp/good.h5") / 1024 / 2 ))
expect_refusal ckfull "ck/ck.h5: .*File too large" limited "$ck_kib" "$adgnn" "${train[@]}" --epochs 2 --hidden 8 "$tmp/g.h5" \
  --checkpoint "$tmp/ck/ck.h5" --checkpoint-every 1 --resume
if cmp -s "$tmp/ck/ck.h5" "$tmp/good.h5"; then ok; else bad "the last good checkpoint changed"; fi
no_temporaries ckfull "$tmp/ck"
run resume "$adgnn" "${train[@]}" --epochs 2 --hidden 8 "$tmp/g.h5" --checkpoint "$tmp/ck/ck.h5" --resume

# Graph files, part folders, predictions: nothing half-written is left in place.
expect_refusal genfull "g2.h5: .*File too large" limited 200 "$adgnn" data generate --nodes 3000 --classes 4 \
  --avg-degree 6 --features 64 --seed 3 -o "$tmp/g2.h5"
[ ! -e "$tmp/g2.h5" ] && ok || bad "genfull left g2.h5"
no_temporaries genfull "$tmp"
expect_refusal partfull "File too large" limited 100 "$adgnn" partition "$tmp/g.h5" --parts 2 --out "$tmp/parts"
[ ! -e "$tmp/parts/manifest.json" ] && ok || bad "partfull wrote a manifest"
no_temporaries partfull "$tmp/parts"
expect_refusal predfull "pred.h5: .*File too large" limited 8 "$adgnn" "${train[@]}" --epochs 1 --hidden 8 "$tmp/g.h5" \
  --predictions "$tmp/pred.h5"
[ ! -e "$tmp/pred.h5" ] && ok || bad "predfull left pred.h5"

# Streams: the metrics file and standard output.
expect_refusal metricsfull "--metrics /dev/full: write failed" "$adgnn" "${train[@]}" --epochs 1 --hidden 8 "$tmp/g.h5" --metrics /dev/full
expect_refusal stdoutfull "standard output: write failed" sh -c "'$adgnn' data stats '$tmp/g.h5' >/dev/full"

# Inputs that must be refused in one line, not end in a stack trace or run on silently.
t1=(train --epochs 1 --no-progress "$tmp/g.h5")
expect_refusal dropoutnan "--dropout nan: must be in \[0, 1)" "$adgnn" "${t1[@]}" --dropout nan
expect_refusal hidden "--hidden 100000000: must be in \[1, 65536\]" "$adgnn" "${t1[@]}" --hidden 100000000
expect_refusal layers "--layers 5000: must be in \\[1, 1024\\]" "$adgnn" "${t1[@]}" --layers 5000
expect_refusal threads "--threads -1: must be >= 0" "$adgnn" "${t1[@]}" --threads -1
expect_refusal seed "--seed" "$adgnn" "${t1[@]}" --seed -1
expect_refusal device "--device cuda:7:" "$adgnn" "${t1[@]}" --device cuda:7
expect_refusal devicename "--device gpu: expected cpu, cuda or cuda:N" "$adgnn" "${t1[@]}" --device gpu
for t in abc 0 -5; do
  expect_refusal "timeout$t" "ADGNN_COMM_TIMEOUT=$t: must be a positive number" env ADGNN_COMM_TIMEOUT=$t "$adgnn" "${t1[@]}"
done
expect_refusal resumemissing "--resume: checkpoint .*nothere.h5 does not exist" "$adgnn" "${t1[@]}" \
  --checkpoint "$tmp/nothere.h5" --resume

expect_refusal backend "--backend nccl: one process has no communicator" "$adgnn" "${t1[@]}" --backend nccl
expect_refusal epochs "--epochs 200000000: must be in \[1, 100000000\]" "$adgnn" train --no-progress "$tmp/g.h5" --epochs 200000000
# Beyond int64: named as typed, not as the value CLI11 would saturate it to.
expect_refusal epochs_int64 "--epochs: 99999999999999999999 is not a whole number" "$adgnn" train --no-progress "$tmp/g.h5" --epochs 99999999999999999999
# A resume names the settings that differ from the checkpoint's.
run ckmis "$adgnn" "${train[@]}" --epochs 1 --hidden 8 "$tmp/g.h5" --checkpoint "$tmp/mis.h5"
expect_refusal mismatch "mis.h5: checkpoint was written by a different configuration (lr 0.01 in the checkpoint, 0.02 now)" \
  "$adgnn" "${train[@]}" --epochs 2 --hidden 8 "$tmp/g.h5" --checkpoint "$tmp/mis.h5" --resume --lr 0.02
# A resumed run repeats the epochs after its checkpoint: the metrics keep one line per epoch.
m=(--hidden 8 "$tmp/g.h5" --checkpoint "$tmp/m.h5" --metrics "$tmp/m.jsonl")
run m2 "$adgnn" "${train[@]}" --epochs 2 "${m[@]}"
cp "$tmp/m.h5" "$tmp/m2.h5"
run m3 "$adgnn" "${train[@]}" --epochs 3 "${m[@]}" --resume
cp "$tmp/m2.h5" "$tmp/m.h5"  # as if the run had stopped after epoch 3's line, before its checkpoint
run m4 "$adgnn" "${train[@]}" --epochs 4 "${m[@]}" --resume
epochs=$(grep -o '"epoch":[0-9]*' "$tmp/m.jsonl" | cut -d: -f2 | tr '\n' ' ')
[ "$epochs" = "1 2 3 4 " ] && ok || bad "metrics after a resume: epochs $epochs"
# A file this user may not read is reported as such (root reads everything: run as nobody).
cp "$tmp/g.h5" "$tmp/locked.h5"
chmod 000 "$tmp/locked.h5"
chmod 755 "$tmp"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
   setpriv --reuid=65534 --regid=65534 --clear-groups "$adgnn" --help >/dev/null 2>&1; then
  expect_refusal locked "locked.h5: cannot open (Permission denied)" \
    setpriv --reuid=65534 --regid=65534 --clear-groups "$adgnn" data stats "$tmp/locked.h5"
elif [ "$(id -u)" != 0 ]; then
  expect_refusal locked "locked.h5: cannot open (Permission denied)" "$adgnn" data stats "$tmp/locked.h5"
else
  echo "skipped: the unreadable-file drill (root without setpriv, or nobody cannot run $adgnn)"
fi

# A real full disk and a read-only filesystem, where this user may mount (root in CI).
mnt=$tmp/mnt
mkdir -p "$mnt"
if mount -t tmpfs -o size=64k tmpfs "$mnt" 2>/dev/null; then
  run small "$adgnn" "${train[@]}" --hidden 2 --epochs 1 "$tmp/g.h5" --checkpoint "$mnt/ck.h5"
  if [ -f "$mnt/ck.h5" ]; then
    cp "$mnt/ck.h5" "$tmp/small.h5"
    head -c 1M /dev/zero >"$mnt/fill" 2>/dev/null
    expect_refusal tmpfsfull "ck.h5: .*No space left on device" "$adgnn" "${train[@]}" --hidden 2 --epochs 2 \
      "$tmp/g.h5" --checkpoint "$mnt/ck.h5" --resume
    if cmp -s "$mnt/ck.h5" "$tmp/small.h5"; then ok; else bad "tmpfs: the last good checkpoint changed"; fi
    no_temporaries tmpfsfull "$mnt"
  else
    bad "a 64 KiB tmpfs does not hold the small checkpoint"
  fi
  umount "$mnt"
  if mount -t tmpfs -o ro,size=64k tmpfs "$mnt" 2>/dev/null; then
    expect_refusal readonly "out.h5: .*Read-only file system" "$adgnn" data generate --nodes 100 --classes 2 \
      --avg-degree 4 --features 4 -o "$mnt/out.h5"
    umount "$mnt"
  fi
else
  echo "skipped: the tmpfs drills (this user may not mount)"
fi
finish
