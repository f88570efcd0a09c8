"""The job queue of scripts/experiments.py and scripts/results.py: adgnn processes run up to a
number of slots at once, each after the jobs it depends on, with a time after which none starts
and one at which the running ones are stopped (finished outputs stay: a rerun continues).

A job is any object with
  name, deps (names), slots (how many it takes), log (set here: the open log file),
  start(log) -> subprocess.Popen   (launches it; `launch` below does the usual way),
  complete() -> bool               (its output exists and is whole).
The caller orders the jobs (the first that fits starts first)."""

import os
import signal
import subprocess
import time


def quote(s):
    return "'" + str(s).replace("'", "'\\''") + "'"


def launch(cmd, log, env=None):
    """Starts cmd in a session of its own (so that stopping it stops its children) with its
    output in log."""
    log.write(" ".join(quote(c) for c in cmd) + "\n")
    log.flush()
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def run_queue(jobs, slots, log_path, say, stop_launch=None, hard_stop=None, t0=None, done_elsewhere=()):
    """Runs the jobs that are not complete yet. log_path(job) names its log file. stop_launch /
    hard_stop: seconds after t0 (default: now) after which no job starts / the running ones are
    killed. done_elsewhere: names of complete jobs outside `jobs` that some depend on. SIGTERM (a
    timeout, a batch system's limit) stops the running jobs as Ctrl-C does, then raises
    KeyboardInterrupt. Returns (done, failed): sets of names."""
    t0 = time.time() if t0 is None else t0
    done = {j.name for j in jobs if j.complete()} | set(done_elsewhere)
    pending = [j for j in jobs if j.name not in done]
    running, failed = [], set()
    started = {}

    # The jobs run in sessions of their own, so they would outlive this script and race a rerun
    # for their files: SIGTERM stops them as Ctrl-C does.
    def on_term(signum, frame):
        raise KeyboardInterrupt
    old_term = signal.signal(signal.SIGTERM, on_term)
    try:
        while pending or running:
            for j in list(running):
                rc = j.proc.poll()
                if rc is None:
                    continue
                running.remove(j)
                j.log.close()
                took = time.time() - started[j.name]
                if rc == 0 and j.complete():
                    done.add(j.name)
                    say(f"done   {j.name} ({took:.1f}s)")
                else:
                    failed.add(j.name)
                    say(f"FAILED {j.name} (exit {rc}, {took:.1f}s); log: {j.log.name}")
            now = time.time() - t0
            if hard_stop is not None and now >= hard_stop and running:
                for j in running:
                    _stop(j, signal.SIGKILL)
                    j.proc.wait()
                    j.log.close()
                    say(f"killed {j.name} at the hard stop ({time.time() - started[j.name]:.1f}s in)")
                running = []
                break
            launching = stop_launch is None or now < stop_launch
            for j in list(pending):
                if any(d in failed for d in j.deps):
                    pending.remove(j)
                    failed.add(j.name)
                    say(f"skip   {j.name}: a run it needs failed")
                    continue
                used = sum(r.slots for r in running)
                # A job larger than the slots starts alone rather than never.
                if not launching or (running and used + j.slots > slots) or not all(d in done for d in j.deps):
                    continue
                os.makedirs(os.path.dirname(log_path(j)) or ".", exist_ok=True)
                j.log = open(log_path(j), "w")
                j.proc = j.start(j.log)
                started[j.name] = time.time()
                pending.remove(j)
                running.append(j)
                say(f"start  {j.name} [{used + j.slots}/{slots} slots]")
            if not running and pending:  # nothing runs and nothing can start
                for j in pending:
                    why = "the time box" if not launching else \
                        "waits for " + ", ".join(d for d in j.deps if d not in done)
                    say(f"skip   {j.name}: {why}")
                break
            time.sleep(0.1)
    except KeyboardInterrupt:  # the finished runs stay; a rerun continues
        for j in running:
            _stop(j, signal.SIGTERM)
        raise
    finally:
        signal.signal(signal.SIGTERM, old_term)
    return done, failed


def _stop(job, sig):
    try:
        os.killpg(job.proc.pid, sig)
    except ProcessLookupError:
        pass
