"""scripts/trace_by_op.py on a hand-made Chrome trace: kernels are summed under the scope and
operations that launched them (by the launch's correlation id and thread), a scope filter keeps
only its kernels, --gaps sums the device's idle gaps by the operation whose launch ended each,
--timeline lists the events in order with the waits where only NCCL (or nothing) ran, an
autograd node is named without the engine's prefix, --shapes adds the inner operation's input
shapes, and an unreadable file exits 2 with one line."""
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


def run(tmp, name, events, *flags):
    """The script's output on `events` written as tmp/name, and its table rows."""
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump({"traceEvents": events}, f)
    out = subprocess.run([sys.executable, script, path, *flags], capture_output=True, text=True, check=True).stdout
    return out, [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]


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
    out, rows = run(tmp, "t.trace.json", events)
    want = ["| 300 | 1 | forward | aten::index_select | aten::gather | gather_kernel |",
            "| 120 | 2 | dropout | ? | ? | dropout_kernel |",
            "| 5 | 1 | - | ? | ? | lonely_kernel |"]
    if rows != want:
        print("FAIL: rows\n" + "\n".join(rows))
        failed += 1
    if "0.425 ms" not in out.splitlines()[0]:
        print("FAIL: total: " + out.splitlines()[0])
        failed += 1
    out, _ = run(tmp, "t.trace.json", events, "--scope", "dropout")
    if "gather_kernel" in out or "dropout_kernel" not in out:
        print("FAIL: --scope dropout\n" + out)
        failed += 1
    # --gaps: kernels at 0-10, 50-60, 62-70 and 100-110 us: gaps of 40 and 30 us (the 2 us one is
    # below the threshold), ended by launches inside aten::sub in scope "depth benefit".
    gap_events = [
        op("forward", "user_annotation", 0, 20), op("aten::mm", "cpu_op", 1, 5), launch(11, 2),
        op("depth benefit", "user_annotation", 30, 80), op("aten::sub", "cpu_op", 40, 5), launch(12, 41),
        op("aten::div", "cpu_op", 50, 5), launch(13, 51), op("aten::sub", "cpu_op", 90, 5), launch(14, 91),
        dict(kernel("mm_kernel", 11, 10), ts=0), dict(kernel("sub_kernel", 12, 10), ts=50),
        dict(kernel("div_kernel", 13, 8), ts=62), dict(kernel("sub_kernel", 14, 10), ts=100),
    ]
    out, rows = run(tmp, "gaps.trace.json", gap_events, "--gaps", "5")
    if rows != ["| 70 | 2 | depth benefit | aten::sub | aten::sub |"] or "0.070 ms per step idle" not in out:
        print("FAIL: --gaps\n" + out)
        failed += 1
    # An autograd node's operation without the engine's prefix; --shapes adds the inner op's input
    # shapes.
    node_events = [
        op("autograd::engine::evaluate_function: torch::autograd::CppNode<adgnn::Agg>", "cpu_op", 0, 50),
        dict(op("aten::add_", "cpu_op", 5, 10), args={"Input Dims": [[4, 128], [4, 128], []]}), launch(21, 6),
        dict(kernel("add_kernel", 21, 9), ts=20),
    ]
    for flags, want in (([], "| 9 | 1 | - | CppNode<adgnn::Agg> | aten::add_ | add_kernel |"),
                        (["--shapes"], "| 9 | 1 | - | CppNode<adgnn::Agg> | aten::add_ [[4,128],[4,128],[]] | add_kernel |")):
        out, rows = run(tmp, "node.trace.json", node_events, *flags)
        if rows != [want]:
            print(f"FAIL: autograd node {flags}\n" + out)
            failed += 1
    # --timeline 20: a compute kernel 0-100 us, NCCL 90-390 on another stream, compute 400-450 and
    # 600-605: a 300 us wait with NCCL running, a 150 us idle one; the 5 us kernel is not listed.
    tl_events = [
        op("forward", "user_annotation", 0, 1000), launch(31, 1), launch(32, 2), launch(33, 3), launch(34, 4),
        dict(kernel("spmm", 31, 100), ts=0, args={"correlation": 31, "stream": 7}),
        dict(kernel("ncclDevKernel_SendRecv", 32, 300), ts=90, args={"correlation": 32, "stream": 20}),
        dict(kernel("gemm", 33, 50), ts=400, args={"correlation": 33, "stream": 7}),
        dict(kernel("tiny", 34, 5), ts=600, args={"correlation": 34, "stream": 7}),
    ]
    out, rows = run(tmp, "timeline.trace.json", tl_events, "--timeline", "20")
    want = ["| 0 | 100 | 7 | forward | ? | spmm |",
            "| 90 | 300 | 20 | forward | ? | ncclDevKernel_SendRecv |",
            "| 100 | 300 | - | wait | NCCL running | (no other kernel) |",
            "| 400 | 50 | 7 | forward | ? | gemm |",
            "| 450 | 150 | - | wait | idle | (no other kernel) |"]
    if rows != want:
        print("FAIL: --timeline\n" + out)
        failed += 1
    bad = subprocess.run([sys.executable, script, os.path.join(tmp, "missing.json")], capture_output=True, text=True)
    if bad.returncode != 2 or len(bad.stderr.strip().splitlines()) != 1 or "missing.json" not in bad.stderr:
        print(f"FAIL: missing file: exit {bad.returncode}, stderr {bad.stderr!r}")
        failed += 1
print("trace_by_op: " + ("ok" if failed == 0 else f"{failed} failed"))
sys.exit(1 if failed else 0)
