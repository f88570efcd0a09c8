# Host latency of autograd's backward() on CUDA (device-thread handoff) against CPU tensors.
import time, torch, statistics as st
def run(dev, nodes, reps=200):
    w = torch.ones(8, device=dev, requires_grad=True)
    ts = []
    for i in range(reps + 20):
        y = w
        for _ in range(nodes): y = y * 1.0001
        l = y.sum()
        if dev == "cuda": torch.cuda.synchronize()
        t0 = time.perf_counter(); l.backward(); t1 = time.perf_counter()
        if dev == "cuda": torch.cuda.synchronize()
        if i >= 20: ts.append((t1 - t0) * 1e6)
    return st.median(ts)
for dev in ("cpu", "cuda"):
    for n in (1, 40):
        print(f"{dev:5s} {n:3d} nodes: backward() host {run(dev, n):7.1f} us (median of 200)")
# per-op host cost of a tiny CUDA op with and without grad
x = torch.ones(8, device="cuda", requires_grad=True); torch.cuda.synchronize()
for g in (False, True):
    with torch.set_grad_enabled(g):
        t0 = time.perf_counter()
        for _ in range(2000): y = x * 1.0001
        t1 = time.perf_counter()
    torch.cuda.synchronize()
    print(f"mul on cuda, grad {g}: {(t1 - t0) / 2000 * 1e6:.1f} us per op (python included)")
