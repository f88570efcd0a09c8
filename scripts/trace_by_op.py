#!/usr/bin/env python3
"""Kernel time of a Chrome trace (`adgnn train --profile`, kept with KEEP_TRACES=1 in
scripts/device_ab.sh) summed by the operation that launched each kernel: the innermost profiler
scope (ours: "forward", "halo exchange", "dropout", ...), the outermost and innermost aten / autograd
operation on the launching thread, and the kernel's name. The Markdown summaries of
`--profile` total kernels by name only; this tells which line of code a kernel came from.

    python3 scripts/trace_by_op.py rank1.trace.json [--scope forward] [--top 40] [--steps 1]

--steps: how many steps the trace holds (the summaries' Chrome trace holds the last one).
--shapes: the inner operation's input shapes too (`adgnn train --profile` records them), e.g. to
tell which of several same-named operations a kernel time belongs to.
An autograd node is named without its "autograd::engine::evaluate_function: " prefix (the node,
e.g. "CppNode<adgnn::(anonymous namespace)::CsrAggregate>", is what tells them apart).
--gaps US: instead, the device's idle gaps of at least US microseconds between its first and last
kernel, summed by the operation whose launch ended each (where the device waited for the host;
Kineto's own overhead lengthens the host's time, so read the ranking more than the sum).
--timeline US: instead, the step in time order: each device event of at least US microseconds
(NCCL's always) with its start (us from the first event), length, stream and launching scope, and
each interval of at least US where no kernel but NCCL's ran (a rank waiting for its peers or for
the host), marked with whether an NCCL kernel ran during it.
"""
import argparse
import bisect
import collections
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--scope", help="only kernels launched inside this innermost profiler scope ('-': none)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--shapes", action="store_true", help="the inner operation's input shapes too")
    ap.add_argument("--gaps", type=float, metavar="US", help="the device's idle gaps of at least US us instead")
    ap.add_argument("--timeline", type=float, metavar="US", help="the events and waits of at least US us in order")
    a = ap.parse_args()
    try:
        with open(a.trace) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        print(f"trace_by_op.py: {a.trace}: not a readable Chrome trace ({e})", file=sys.stderr)
        sys.exit(2)
    launches = {e["args"].get("correlation"): e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "args" in e}
    ops = collections.defaultdict(list)  # per thread, sorted by start
    for e in events:
        if e.get("cat") in ("cpu_op", "user_annotation") and "dur" in e:
            ops[e["tid"]].append(e)
    starts = {}
    for tid, lst in ops.items():
        lst.sort(key=lambda o: (o["ts"], -o["dur"]))
        starts[tid] = [o["ts"] for o in lst]
    def launched_by(e, outer_width=50, inner_width=30):
        """(innermost scope, outermost and innermost op) around the launch of device event e."""
        launch = launches.get(e.get("args", {}).get("correlation"))
        stack = []
        if launch is not None and launch["tid"] in starts:
            lst = ops[launch["tid"]]
            end = bisect.bisect_right(starts[launch["tid"]], launch["ts"])
            stack = [o for o in lst[:end] if launch["ts"] <= o["ts"] + o["dur"]]
        scopes = [o["name"] for o in stack if o.get("cat") == "user_annotation"]
        aten = [o for o in stack if o.get("cat") == "cpu_op"]
        inner = op_name(aten[-1], inner_width) if aten else "?"
        if a.shapes and aten and "Input Dims" in aten[-1].get("args", {}):
            inner += " " + json.dumps(aten[-1]["args"]["Input Dims"], separators=(",", ":"))
        return (scopes[-1] if scopes else "-", op_name(aten[0], outer_width) if aten else "?", inner)

    device = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e),
                    key=lambda e: e["ts"])
    if a.gaps is not None:
        print_gaps(a, device, launched_by)
        return
    if a.timeline is not None:
        print_timeline(a, device, launched_by)
        return
    total = collections.defaultdict(lambda: [0, 0.0])
    for e in device:
        scope, outer, inner = launched_by(e)
        if a.scope is not None and scope != a.scope:
            continue
        key = (scope, outer, inner, e["name"][:70])
        total[key][0] += 1
        total[key][1] += e["dur"]
    busy = sum(v[1] for v in total.values()) / a.steps
    print(f"{a.trace}: {busy / 1000:.3f} ms of kernels and copies per step" +
          (f" in scope {a.scope!r}" if a.scope else ""))
    print("| us per step | calls per step | scope | outer op | inner op | kernel |")
    print("|---:|---:|---|---|---|---|")
    for key, (calls, us) in sorted(total.items(), key=lambda kv: -kv[1][1])[:a.top]:
        cells = " | ".join(k.replace("|", "/") for k in key)
        print(f"| {us / a.steps:.0f} | {calls / a.steps:g} | {cells} |")


def op_name(op, width):
    """An operation's name, an autograd node's without the engine's prefix, cut to `width`."""
    name = op["name"]
    for prefix in ("autograd::engine::evaluate_function: ", "torch::autograd::"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name[:width]


def print_gaps(a, device, launched_by):
    """The idle intervals between device events, summed by what launched the event ending each."""
    total = collections.defaultdict(lambda: [0, 0.0])
    idle = 0.0
    end = None
    for e in device:
        if end is not None and e["ts"] - end >= a.gaps:
            key = launched_by(e, 60, 80)
            if a.scope is None or key[0] == a.scope:
                total[key][0] += 1
                total[key][1] += e["ts"] - end
                idle += e["ts"] - end
        end = e["ts"] + e["dur"] if end is None else max(end, e["ts"] + e["dur"])
    span = (end - device[0]["ts"]) if device else 0.0
    print(f"{a.trace}: {idle / a.steps / 1000:.3f} ms per step idle in gaps of >= {a.gaps:g} us "
          f"({span / a.steps / 1000:.3f} ms from the first device event to the last)")
    print("| idle us per step | gaps per step | scope | outer op | inner op (its launch ended the gap) |")
    print("|---:|---:|---|---|---|")
    for key, (count, us) in sorted(total.items(), key=lambda kv: -kv[1][1])[:a.top]:
        cells = " | ".join(k.replace("|", "/") for k in key)
        print(f"| {us / a.steps:.0f} | {count / a.steps:g} | {cells} |")


def print_timeline(a, device, launched_by):
    """The device events of at least a.timeline us in order, and the waits between the others."""
    if not device:
        return
    t0 = device[0]["ts"]
    nccl = [e for e in device if "nccl" in e["name"].lower()]
    def nccl_during(b, e):
        return any(n["ts"] < e and n["ts"] + n["dur"] > b for n in nccl)
    print(f"{a.trace}: events of >= {a.timeline:g} us (NCCL's always) and waits where only NCCL ran")
    print("| start us | us | stream | scope | inner op | event |")
    print("|---:|---:|---|---|---|---|")
    end = None
    for e in device:
        is_nccl = "nccl" in e["name"].lower()
        if not is_nccl:
            if end is not None and e["ts"] - end >= a.timeline:
                print(f"| {end - t0:.0f} | {e['ts'] - end:.0f} | - | wait | "
                      f"{'NCCL running' if nccl_during(end, e['ts']) else 'idle'} | (no other kernel) |")
            end = e["ts"] + e["dur"] if end is None else max(end, e["ts"] + e["dur"])
        if is_nccl or e["dur"] >= a.timeline:
            scope, _, inner = launched_by(e, 40, 40)
            print(f"| {e['ts'] - t0:.0f} | {e['dur']:.0f} | {e.get('args', {}).get('stream', '?')} | {scope} | "
                  f"{inner.replace('|', '/')} | {e['name'][:60].replace('|', '/')} |")


if __name__ == "__main__":
    main()
