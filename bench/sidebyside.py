#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Time commands side by side, interleaved, and print medians and ratios.

    sidebyside.py --cases CASES.json [-n N] [--n-slow N] [--json OUT] [--seed S]
                  [--idle-ms MS] [--no-slow]

CASES.json is a list of objects:
    {"group": "true", "tool": "docker run --rm", "argv": [...],
     "slow": false, "ref": false, "base": false, "mntns": null, "note": "..."}

Every case is first run once with its output captured (a probe): a case whose
probe fails is reported as unavailable with its error, never timed. Then two
untimed warm-up runs, then rounds: in each round every case that still needs
samples runs once, in a shuffled order, so that the noise of a shared machine
falls on every tool alike. N runs for ordinary cases, --n-slow for slow ones.
Each run is timed from just before posix_spawn to the reaping of the child
(stdio on /dev/null); a run that exits non-zero counts as a failure. With
--idle-ms, this process sleeps MS before every timed run (the machine idle
as far as the tools are concerned: caches and CPU frequency as after a
pause); --no-slow leaves the slow cases out.

"mntns" (optional) names a mount namespace file (/proc/PID/ns/mnt) that the
command must run in: this process enters it with setns() just before the
timer starts and returns to its own right after the timer stops.

Within a group, "ratio" is the case's p50 over the p50 of the group's "ref"
case (msb), and "x base" its p50 over the "base" case's (fork+exec).
Percentiles are nearest-rank. Standard library only.

With --cpu-file (this helper runs alone in a cgroup: bench/run makes one),
the cgroup's CPU time is read around each run too: the CPU that every
process of the command used, which contention inflates far less than wall
time. A case says "cpu": "partial" when its runtime moves the container's
processes to cgroups of their own, "none" when the work is done by a daemon.
"""
import argparse
import ctypes
import json
import os
import random
import select
import shutil
import subprocess
import sys
import time

CLONE_NEWNS = 0x00020000
RUN_TIMEOUT_S = 120

_libc = ctypes.CDLL(None, use_errno=True)


def setns(fd):
    if _libc.setns(fd, CLONE_NEWNS) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "setns: " + os.strerror(e))


class NsSwitch:
    """Enter a mount namespace for the duration of a with-block."""

    def __init__(self, path, home_fd):
        self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC) if path else -1
        self.home = home_fd

    def __enter__(self):
        if self.fd >= 0:
            setns(self.fd)
        return self

    def __exit__(self, *exc):
        if self.fd >= 0:
            setns(self.home)
            os.chdir("/")
        return False

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def pct(sorted_v, q):
    n = len(sorted_v)
    k = max(1, min(n, int(q * n + 0.999999)))
    return sorted_v[k - 1]


def wait_child(pid, timeout):
    """Reap pid; returns its wait status, or None after killing it on timeout."""
    try:
        pfd = os.pidfd_open(pid)
    except OSError:
        pfd = -1
    if pfd >= 0:
        p = select.poll()
        p.register(pfd, select.POLLIN)
        ready = p.poll(timeout * 1000)
        os.close(pfd)
        if not ready:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return None
    _, status = os.waitpid(pid, 0)
    return status


def probe(case, home_fd):
    """One run with output captured. Returns an error string or None."""
    sw = NsSwitch(case.get("mntns"), home_fd)
    try:
        with sw:
            r = subprocess.run(case["argv"], stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "timed out after %d s" % RUN_TIMEOUT_S
    except OSError as e:
        return str(e)
    finally:
        sw.close()
    if r.returncode != 0:
        out = (r.stderr or b"") + (r.stdout or b"")
        text = out.decode("utf-8", "replace").strip().splitlines()
        tail = " | ".join(text[-3:]) if text else ""
        return "exit status %d: %s" % (r.returncode, tail[:400])
    return None


def cpu_ns(path):
    """CPU time of a cgroup in ns (v1 cpuacct.usage or v2 cpu.stat), or None."""
    if not path:
        return None
    try:
        with open(path) as f:
            if path.endswith("cpu.stat"):
                for line in f:
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) * 1000
                return None
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def timed_run(path, argv, env, fa, sw, cpu_file):
    with sw:
        c0 = cpu_ns(cpu_file)
        t0 = time.perf_counter_ns()
        pid = os.posix_spawn(path, argv, env, file_actions=fa)
        status = wait_child(pid, RUN_TIMEOUT_S)
        t1 = time.perf_counter_ns()
        c1 = cpu_ns(cpu_file)
    ok = status is not None and os.waitstatus_to_exitcode(status) == 0
    cpu = (c1 - c0) / 1e6 if c0 is not None and c1 is not None else None
    return ok, (t1 - t0) / 1e6, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", required=True)
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--n-slow", type=int, default=30)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--idle-ms", type=int, default=0, help="sleep this long before each run")
    ap.add_argument("--no-slow", action="store_true", help="leave the slow cases out")
    ap.add_argument("--cpu-file", help="the CPU usage file of the cgroup this program runs in "
                    "alone (cpuacct.usage or cpu.stat): report CPU time per run too")
    args = ap.parse_args()
    with open(args.cases) as f:
        cases = json.load(f)
    if args.no_slow:
        cases = [c for c in cases if not c.get("slow")]
    home_fd = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    env = dict(os.environ)
    fa = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
          (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
          (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)]

    active = []
    for c in cases:
        c["target"] = args.n_slow if c.get("slow") else args.n
        c["samples"] = []
        c["cpu_samples"] = []
        c["failures"] = 0
        exe = c["argv"][0]
        path = exe if "/" in exe else shutil.which(exe)
        if not path:
            c["error"] = "`%s` is not installed" % exe
            print("  %-8s %-34s unavailable: %s" % (c["group"], c["tool"], c["error"]),
                  file=sys.stderr, flush=True)
            continue
        c["path"] = path
        err = probe(c, home_fd)
        for _ in range(2):
            if err is None:
                err = probe(c, home_fd)
        if err:
            c["error"] = err
            print("  %-8s %-34s unavailable: %s" % (c["group"], c["tool"], err),
                  file=sys.stderr, flush=True)
            continue
        c["sw"] = NsSwitch(c.get("mntns"), home_fd)
        active.append(c)
        print("  %-8s %-34s ok" % (c["group"], c["tool"]), file=sys.stderr, flush=True)

    rng = random.Random(args.seed)
    t_start = time.monotonic()
    rounds = max([c["target"] for c in active] or [0])
    for r in range(rounds):
        order = [c for c in active if len(c["samples"]) + c["failures"] < c["target"]]
        rng.shuffle(order)
        for c in order:
            if args.idle_ms > 0:
                time.sleep(args.idle_ms / 1000)
            ok, ms, cpu = timed_run(c["path"], c["argv"], env, fa, c["sw"], args.cpu_file)
            if ok:
                c["samples"].append(ms)
                if cpu is not None:
                    c["cpu_samples"].append(cpu)
            else:
                c["failures"] += 1
        if (r + 1) % 10 == 0:
            print("  round %d/%d (%.0f s)" % (r + 1, rounds, time.monotonic() - t_start),
                  file=sys.stderr, flush=True)
    for c in active:
        c["sw"].close()
        del c["sw"]

    groups = []
    for c in cases:
        if c["group"] not in groups:
            groups.append(c["group"])
        v = sorted(c["samples"])
        if v:
            c["p50_ms"] = pct(v, .5)
            c["p90_ms"] = pct(v, .9)
            c["p99_ms"] = pct(v, .99)
            c["min_ms"] = v[0]
            c["mean_ms"] = sum(v) / len(v)
        cv = sorted(c["cpu_samples"])
        if cv and c.get("cpu") != "none":
            c["cpu_p50_ms"] = pct(cv, .5)
        c["n"] = len(v)
    for g in groups:
        members = [c for c in cases if c["group"] == g]
        ref = next((c for c in members if c.get("ref") and "p50_ms" in c), None)
        base = next((c for c in members if c.get("base") and "p50_ms" in c), None)
        for c in members:
            if "p50_ms" in c and ref:
                c["ratio_to_msb"] = c["p50_ms"] / ref["p50_ms"]
            if "p50_ms" in c and base:
                c["ratio_to_base"] = c["p50_ms"] / base["p50_ms"]

    for g in groups:
        title = next((c.get("title") for c in cases if c["group"] == g and c.get("title")), g)
        print("\n## %s\n" % title)
        cpu_col = bool(args.cpu_file)
        print("| tool | p50 ms | p90 ms | n (fail) | ratio to msb | x fork+exec |%s"
              % (" CPU ms p50 |" if cpu_col else ""))
        print("| --- | ---: | ---: | ---: | ---: | ---: |%s" % (" ---: |" if cpu_col else ""))
        for c in cases:
            if c["group"] != g:
                continue
            if "p50_ms" not in c:
                why = c.get("error") or "no successful run (%d failures)" % c["failures"]
                print("| %s | — | — | 0 | cannot run here: %s | |" % (c["tool"], why))
                continue
            ratio = "%.2f" % c["ratio_to_msb"] if "ratio_to_msb" in c else ""
            xb = "%.1f" % c["ratio_to_base"] if "ratio_to_base" in c else ""
            fail = " (%d)" % c["failures"] if c["failures"] else ""
            cpu = ""
            if cpu_col:
                if "cpu_p50_ms" in c:
                    cpu = " %.2f%s |" % (c["cpu_p50_ms"], " *" if c.get("cpu") == "partial"
                                         else "")
                else:
                    cpu = " n/a |"
            print("| %s | %.2f | %.2f | %d%s | %s | %s |%s" % (c["tool"], c["p50_ms"],
                                                             c["p90_ms"], c["n"], fail, ratio,
                                                             xb, cpu))
    if args.cpu_file:
        print("\nCPU ms: CPU time of every process the command started, from the cgroup this"
              "\nhelper runs in; * = partial (the runtime moves the container's processes to"
              "\ncgroups of their own); n/a = the work happens in a daemon.")
    sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"n": args.n, "n_slow": args.n_slow, "cases": cases}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
