#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Where the CLI's critical path spends its time, in counts a loaded machine keeps.

    critical_path.py --msb PATH [--runs N] [--out DIR] [--cases a,b]

MSB_SHIM and MSB_AGENT name the helpers, as for msb. Issue 17's CLI
targets, each case a new `msb` process:

    version    msb version
    exec       msb exec -- /bin/true into a warm sandbox (acquired once here)
    run_pool   msb run -- /bin/true, pool_size 2 (the pool filled first)
    run_cold   msb run -- /bin/true, pool_size 0

For each case, N timed runs (posix_spawn to wait4, interleaved with a
fork+exec of /bin/true) give the wall time, the CLI's own CPU (its rusage)
and all the CPU the run caused (this program runs alone in a cpuacct cgroup
of its own; the shims, agents and workloads it starts are below it). Then
one run under `strace -f -ttt -T`, attached also to the shims and agents
already running under the case's state root (the warm sandbox, the pooled
ones): the processes the run involved, their system calls, and the CLI's
blocking waits - each the wake-up of another process, a round trip on the
critical path - in order, with what they waited on. strace slows every
system call by tens of microseconds: read the trace for its structure and
counts, the timed runs for the time. Last, the units on this machine: a
fork+exec of /bin/true and a round trip over a socketpair between two
processes (C-level syscalls from Python: an upper bound).

Writes DIR/summary.json and DIR/<case>.trace (merged, by time).
"""
import argparse
import glob
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

CG_ROOTS = ("/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct")
# System calls that block until another process acts: a wake-up.
BLOCKING = {"poll", "ppoll", "epoll_wait", "epoll_pwait", "select", "pselect6", "read",
            "recvmsg", "recvfrom", "wait4", "waitid", "flock", "connect", "futex",
            "nanosleep", "clock_nanosleep", "accept", "accept4", "readv"}
LINE = re.compile(r"^(\d+)\s+(\d+\.\d+) (.*)$")
CALL = re.compile(r"^([a-z0-9_]+)\((.*)$")
RESUMED = re.compile(r"^<\.\.\. ([a-z0-9_]+) resumed>(.*)$")
DUR = re.compile(r"<(\d+\.\d+)>$")
FD_DESC = re.compile(r"(?:^|[=\[{ ])(\d+)<([^>]*)>")


def pct(v, q):
    v = sorted(v)
    if not v:
        return float("nan")
    k = max(1, min(len(v), int(q * len(v) + 0.999999)))
    return v[k - 1]


def make_cgroup():
    for root in CG_ROOTS:
        if os.path.isfile(os.path.join(root, "cpuacct.usage")):
            d = os.path.join(root, "msbb-cp-%d" % os.getpid())
            os.mkdir(d)
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            return d
    return None


def cg_ns(cg):
    if not cg:
        return 0
    with open(os.path.join(cg, "cpuacct.usage")) as f:
        return int(f.read())


def spawn_wait(argv, env):
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=[
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, status, ru = os.wait4(pid, 0)
    t1 = time.perf_counter_ns()
    return status, (t1 - t0) / 1e6, (ru.ru_utime + ru.ru_stime) * 1e3


def units(n):
    fe = [spawn_wait(["/bin/true"], os.environ)[1] for _ in range(n)]
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        a.close()
        try:
            while True:
                m = b.recv(1)
                if not m:
                    break
                b.send(m)
        finally:
            os._exit(0)
    b.close()
    rt = []
    for _ in range(n * 20):
        t0 = time.perf_counter_ns()
        a.send(b"x")
        a.recv(1)
        rt.append((time.perf_counter_ns() - t0) / 1e6)
    a.close()
    os.waitpid(pid, 0)
    return {"fork_exec_ms": pct(fe, .5), "socket_rtt_ms": pct(rt, .5),
            "fork_exec_min_ms": min(fe), "socket_rtt_min_ms": min(rt)}


def helper_pids(states):
    """The shims and agents recorded under the state roots (running)."""
    pids = []
    for st in states:
        for f in glob.glob(os.path.join(st, "ns", "**", "*.pid"), recursive=True):
            if os.path.basename(f) not in ("shim.pid", "init.pid"):
                continue
            try:
                with open(f) as fh:
                    pid = int(fh.read().split()[0])
                os.kill(pid, 0)
                pids.append(pid)
            except (OSError, ValueError, IndexError):
                pass
    return sorted(set(pids))


def parse(path):
    """strace -f -ttt -T output: a list of (pid, start, dur, name, text)."""
    pending = {}
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if not m:
                continue
            pid, ts, rest = int(m.group(1)), float(m.group(2)), m.group(3)
            r = RESUMED.match(rest)
            if r:
                start, head = pending.pop(pid, (ts, ""))
                d = DUR.search(rest)
                out.append((pid, start, float(d.group(1)) if d else 0.0, r.group(1),
                            head + r.group(2)))
                continue
            c = CALL.match(rest)
            if not c:
                continue
            if rest.endswith("<unfinished ...>"):
                pending[pid] = (ts, rest[:-len("<unfinished ...>")])
                continue
            d = DUR.search(rest)
            out.append((pid, ts, float(d.group(1)) if d else 0.0, c.group(1), rest))
    out.sort(key=lambda e: e[1])
    return out


def what(text):
    """The first argument's fd description (strace -yy), or the call's args."""
    m = CALL.match(text)
    args = m.group(2) if m else text
    d = FD_DESC.search(args)
    if d:
        desc = d.group(2)
        return desc if len(desc) < 90 else desc[:87] + "..."
    return args[:90]


def account(events, cli_pid, min_ms):
    names = {}
    per = {}
    for pid, ts, dur, name, text in events:
        p = per.setdefault(pid, {"calls": 0, "first": ts, "last": ts + dur})
        p["calls"] += 1
        p["last"] = max(p["last"], ts + dur)
        if name == "execve" and "= 0" in text:
            names[pid] = text.split('"')[1] if '"' in text else "?"
    t0 = min((e[1] for e in events), default=0)
    procs = [{"pid": pid, "exe": names.get(pid, "(already running)"), "calls": p["calls"],
              "from_ms": round((p["first"] - t0) * 1e3, 3),
              "to_ms": round((p["last"] - t0) * 1e3, 3)} for pid, p in sorted(per.items())]
    waits = []
    cli = set([cli_pid])
    # the CLI and its threads: pids whose first call follows a clone by the CLI
    for pid, ts, dur, name, text in events:
        if pid in cli and name in ("clone", "clone3") and "CLONE_THREAD" in text:
            m = re.search(r"= (\d+)", text)
            if m:
                cli.add(int(m.group(1)))
    for pid, ts, dur, name, text in events:
        if pid in cli and name in BLOCKING and dur * 1e3 >= min_ms:
            waits.append({"pid": pid, "at_ms": round((ts - t0) * 1e3, 3),
                          "ms": round(dur * 1e3, 3), "call": name, "on": what(text)})
    cli_calls = sum(1 for e in events if e[0] in cli)
    return {"processes": procs, "cli_calls": cli_calls, "cli_waits": waits,
            "span_ms": round((max((e[1] + e[2] for e in events), default=t0) - t0) * 1e3, 3)}


def traced(argv, env, attach, out_prefix):
    """One run of argv under strace -f, with strace also attached to attach."""
    side = None
    if attach:
        side = subprocess.Popen(["strace", "-f", "-ttt", "-T", "-yy", "-s", "24", "-o",
                                 out_prefix + ".helpers"] +
                                [a for p in attach for a in ("-p", str(p))],
                                stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # attached
    cli_out = out_prefix + ".cli"
    # -f follows the shims the CLI starts (a cold start, a refill), which
    # outlive it: strace is stopped once the CLI itself has exited.
    tr = subprocess.Popen(["strace", "-f", "-ttt", "-T", "-yy", "-s", "24", "-o", cli_out] +
                          argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cli_pid, until = 0, time.monotonic() + 60
    while time.monotonic() < until and tr.poll() is None:
        time.sleep(0.05)
        try:
            with open(cli_out, errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        if not cli_pid and text.strip():
            cli_pid = int(text.split()[0])
        if cli_pid and re.search(r"^%d\s+\S+ \+\+\+ exited" % cli_pid, text, re.M):
            break
    time.sleep(0.3)  # a refill's shim gets going; helpers settle
    if tr.poll() is None:
        # strace ignores SIGINT while it runs a command; killed, it leaves
        # the shims it followed running, detached by the kernel
        tr.kill()
    tr.wait()
    if side:
        side.send_signal(signal.SIGINT)
        side.wait()
    events = parse(cli_out)
    if side:
        events = sorted(events + parse(out_prefix + ".helpers"), key=lambda e: e[1])
    with open(out_prefix + ".trace", "w") as f:
        t0 = events[0][1] if events else 0
        for pid, ts, dur, name, text in events:
            f.write("%7d %10.3f %8.3f %s\n" % (pid, (ts - t0) * 1e3, dur * 1e3,
                                               text[:200]))
    for suffix in (".cli", ".helpers"):
        try:
            os.unlink(out_prefix + suffix)
        except OSError:
            pass
    return events, cli_pid


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--msb", required=True)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--out", default=None)
    ap.add_argument("--cases", default="version,exec,run_pool,run_cold")
    ap.add_argument("--wait-ms", type=float, default=0.05,
                    help="a CLI's blocking call this long or longer is a wake-up")
    ap.add_argument("--no-strace", action="store_true")
    args = ap.parse_args()
    if not os.environ.get("MSB_SHIM") or not os.environ.get("MSB_AGENT"):
        sys.exit("critical_path.py: set MSB_SHIM and MSB_AGENT")
    out = args.out or tempfile.mkdtemp(prefix="msbb-cp-")
    os.makedirs(out, exist_ok=True)
    strace = not args.no_strace and shutil.which("strace")
    cg = make_cgroup()
    base = tempfile.mkdtemp(prefix="msbb-cp-", dir="/run")  # tmpfs, as /run/msb is
    warm, pool, cold = (os.path.join(base, n) for n in ("warm", "pool", "cold"))
    for d in (warm, pool, cold):
        os.mkdir(d)
    pool_cfg, cold_cfg = os.path.join(base, "pool.json"), os.path.join(base, "cold.json")
    with open(pool_cfg, "w") as f:
        json.dump({"type": "ns", "state_dir": pool, "pool_size": 2}, f)
    with open(cold_cfg, "w") as f:
        json.dump({"type": "ns", "state_dir": cold, "pool_size": 0}, f)
    msb, env = args.msb, dict(os.environ)
    iso = ["--min-isolation", "container"]
    cases = {
        "version": ([msb, "version"], []),
        "exec": ([msb, "exec"] + iso + ["--state-dir", warm, "--thread", "msbb-cp", "--",
                                        "/bin/true"], [warm]),
        "run_pool": ([msb, "run"] + iso + ["--config", pool_cfg, "--", "/bin/true"], [pool]),
        "run_cold": ([msb, "run"] + iso + ["--config", cold_cfg, "--", "/bin/true"], [cold]),
    }
    chosen = [c for c in args.cases.split(",") if c]
    summary = {"units": None, "cases": {}}
    try:
        if "exec" in chosen:
            subprocess.run([msb, "acquire"] + iso + ["--state-dir", warm, "--thread",
                                                     "msbb-cp"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
        if "run_pool" in chosen:
            subprocess.run([msb, "pool", "fill", "--config", pool_cfg], env=env, check=True,
                           stdout=subprocess.DEVNULL)
        summary["units"] = units(max(args.runs, 50))
        for name in chosen:
            argv, states = cases[name]
            wall, cli_cpu, all_cpu, fe, bad = [], [], [], [], 0
            for _ in range(args.runs):
                c0 = cg_ns(cg)
                st, ms, cpu = spawn_wait(argv, env)
                c1 = cg_ns(cg)
                if st != 0:
                    bad += 1
                    continue
                wall.append(ms)
                cli_cpu.append(cpu)
                all_cpu.append((c1 - c0) / 1e6)
                fe.append(spawn_wait(["/bin/true"], env)[1])
            row = {"runs": len(wall), "failed": bad,
                   "wall_p50_ms": pct(wall, .5), "wall_min_ms": min(wall or [0]),
                   "cli_cpu_p50_ms": pct(cli_cpu, .5),
                   "all_cpu_p50_ms": pct(all_cpu, .5) if cg else None,
                   "fork_exec_p50_ms": pct(fe, .5)}
            if strace:
                if name == "run_pool":
                    time.sleep(0.5)  # the last refill ready
                events, cli_pid = traced(argv, env, helper_pids(states),
                                         os.path.join(out, name))
                row["trace"] = account(events, cli_pid, args.wait_ms)
            summary["cases"][name] = row
            print("%-9s wall p50 %6.2f min %6.2f ms; CPU: CLI %5.2f, all %5.2f ms; "
                  "fork+exec %5.2f" % (name, row["wall_p50_ms"], row["wall_min_ms"],
                                       row["cli_cpu_p50_ms"], row["all_cpu_p50_ms"] or 0,
                                       row["fork_exec_p50_ms"]))
            if "trace" in row:
                t = row["trace"]
                print("  traced: %d processes, the CLI %d system calls, %d wake-ups "
                      ">= %.2f ms:" % (len(t["processes"]), t["cli_calls"], len(t["cli_waits"]),
                                       args.wait_ms))
                for w in t["cli_waits"]:
                    print("    %8.3f ms  %7.3f ms  %-8s %s" % (w["at_ms"], w["ms"], w["call"],
                                                            w["on"]))
        u = summary["units"]
        print("units: fork+exec /bin/true p50 %.3f ms (min %.3f); socket round trip p50 %.3f "
              "ms (min %.3f)" % (u["fork_exec_ms"], u["fork_exec_min_ms"], u["socket_rtt_ms"],
                                 u["socket_rtt_min_ms"]))
    finally:
        subprocess.run([msb, "purge", "--state-dir", warm, "--thread", "msbb-cp"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        subprocess.run([msb, "pool", "drain", "--config", pool_cfg], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        for st in (warm, pool, cold):
            left = subprocess.run([msb, "ls", "--state-dir", st], env=env, text=True,
                                  capture_output=True, check=False).stdout.strip()
            if left:
                print("critical_path.py: LEFT BEHIND under %s: %s" % (st, left))
        shutil.rmtree(base, ignore_errors=True)
        if cg:
            with open(os.path.join(os.path.dirname(cg), "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            try:
                os.rmdir(cg)
            except OSError:
                pass
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("written: %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
