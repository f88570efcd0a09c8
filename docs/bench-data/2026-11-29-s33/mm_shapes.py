# Host time of torch.mm / addmm+relu (cuBLASLt epilogue) calls: one shape repeated against a new
# row count each call (AD's deeper layers compute a different number of rows every step).
import time, torch, random
torch.backends.cuda.matmul.allow_tf32 = False
w = torch.randn(128, 128, device="cuda"); b = torch.randn(128, device="cuda")
big = torch.randn(20000, 128, device="cuda")
def host_us(fn, ms, reps=3):
    best = 1e9
    for _ in range(reps):
        torch.cuda.synchronize(); t0 = time.perf_counter()
        for m in ms: fn(m)
        t1 = time.perf_counter(); torch.cuda.synchronize()
        best = min(best, (t1 - t0) / len(ms) * 1e6)
    return best
random.seed(0)
fixed = [700] * 400
varying = [random.randint(300, 3000) for _ in range(400)]
seen = varying[:]  # the same list again: every shape seen before
ops = {
  "mm [m,128]x[128,128]": lambda m: big[:m].mm(w),
  "mm x^T g -> [128,128] (K = m)": lambda m: big[:m].t().mm(big[:m]),
  "addmm_relu (Lt epilogue)": lambda m: torch._addmm_activation(b, big[:m], w),
}
fresh = iter(range(3001, 19001))  # never repeated across the ops' lists either
for name, fn in ops.items():
    host_us(fn, varying, 1)  # every "seen" shape once
    a = host_us(fn, fixed); v = host_us(fn, [next(fresh) for _ in range(400)], 1); s = host_us(fn, seen)
    print(f"{name:34s} host us per call: fixed {a:6.1f}  new rows each call {v:6.1f}  rows seen before {s:6.1f}")
