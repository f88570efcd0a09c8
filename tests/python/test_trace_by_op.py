"""scripts/trace_by_op.py on a hand-made Chrome trace: kernels are summed under the scope and
operations that launched them (by the launch's correlation id and thread), a scope filter keeps
only its kernels, and an unreadable file exits 2 with one line."""
import json
import os
import subprocess
import sys
import tempfile

script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "trace_by_op.py")


def op(name, cat, ts, dur, tid=1):
    return {"name": name, "cat": cat, "ts": ts, "dur": dur, "tid": tid, "ph": "X"}


def launch(corr, ts, tid=1):
    return {"name": "cudaLaunchKernel", "cat": "cuda_runtime", "ts": ts, "dur": 1, "tid": tid,
            "args": {"correlation": corr}}


def kernel(name, corr, dur):
    return {"name": name, "cat": "kernel", "ts": 1000 + corr, "dur": dur, "tid": 7, "args": {"correlation": corr}}


events = [
    op("forward", "user_annotation", 0, 100),
    op("aten::index_select", "cpu_op", 10, 20),
    op("aten::gather", "cpu_op", 12, 10),
    launch(1, 15),
    op("dropout", "user_annotation", 40, 20),
    launch(2, 45),
    launch(3, 47),
    launch(4, 200),  # outside every scope
    kernel("gather_kernel", 1, 300),
    kernel("dropout_kernel", 2, 50),
    kernel("dropout_kernel", 3, 70),
    kernel("lonely_kernel", 4, 5),
]
failed = 0
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "t.trace.json")
    with open(path, "w") as f:
        json.dump({"traceEvents": events}, f)
    out = subprocess.run([sys.executable, script, path], capture_output=True, text=True, check=True).stdout
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    want = ["| 300 | 1 | forward | aten::index_select | aten::gather | gather_kernel |",
            "| 120 | 2 | dropout | ? | ? | dropout_kernel |",
            "| 5 | 1 | - | ? | ? | lonely_kernel |"]
    if rows != want:
        print("FAIL: rows\n" + "\n".join(rows))
        failed += 1
    if "0.425 ms" not in out.splitlines()[0]:
        print("FAIL: total: " + out.splitlines()[0])
        failed += 1
    out = subprocess.run([sys.executable, script, path, "--scope", "dropout"], capture_output=True, text=True,
                         check=True).stdout
    if "gather_kernel" in out or "dropout_kernel" not in out:
        print("FAIL: --scope dropout\n" + out)
        failed += 1
    bad = subprocess.run([sys.executable, script, os.path.join(tmp, "missing.json")], capture_output=True, text=True)
    if bad.returncode != 2 or len(bad.stderr.strip().splitlines()) != 1 or "missing.json" not in bad.stderr:
        print(f"FAIL: missing file: exit {bad.returncode}, stderr {bad.stderr!r}")
        failed += 1
print("trace_by_op: " + ("ok" if failed == 0 else f"{failed} failed"))
sys.exit(1 if failed else 0)
