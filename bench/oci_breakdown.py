#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Where a cold `msb run` on the `oci` backend spends its milliseconds, step by step.

    bench/oci_breakdown.py [--build DIR] [-n N] [--runtimes runsc,crun] [--idle-ms MS]
                           [--trace-cli]

Needs root and the runtimes. Runs `msb run --config {"type":"oci","runtime":R}
-- true` N times per runtime (MS of idle before each, default 150: a cold
start, not one back to back) with MSB_OCI_TIMING set: msb-oci-shim then
appends one line for its start and one for its teardown, each step's
milliseconds and the first step's CLOCK_MONOTONIC time, which lines up with
this script's clock (time.monotonic_ns). The steps, in order:

  cli+acquire  this script's spawn of `msb` to the shim's main(): the CLI's
               start, the router, the library's acquire (state directory,
               flock, labels, shim.json) and the shim's exec
  config       realpaths, shim.json parsed
  detach       setpgid, stdio to /dev/null
  mountns      the shim's private mount namespace
  state        the state directory checked, shim.pid
  cgroup       the control socket; the cgroup planned, recorded and set up
               (its directories made, the limits written)
  fork         the runtime's process forked: it moves itself into the cgroup
               (v1: may wait for an RCU grace period) while the shim goes on
  work         work/ (the storage base)
  tmpfs        the private tmpfs at run/
  rootfs       the writable layer's tmpfs, the skeleton, the overlay, /dev/shm
  bundle       config.json
  release      the runtime's process told to exec the runtime (it may still be
               moving into the cgroup)
  hello        the runtime's own start of the container, the agent's start and
               HELLO: the runtime's work (and the rest of the cgroup move)
  init_pid     the runtime's pid file read, init.pid written
  listen       agent.sock
  report       "ok" to the library
  exec+        the library's return, the CLI's exec of /bin/true through the
               relay, dispose up to the shim's signal
  relay        the relay and the agent's connection closed
  kill         the runtime killed (reaped below when there is a cgroup)
  cgroup(-)    what is left in the cgroup killed, waited for, its directories
               removed; the runtime reaped
  mounts       the private tmpfs unmounted with everything on it
  files        run/, work/, the sockets and pid files removed
  exit+        the library's purge (the shim's exit, the state directory's
               removal) and the CLI's exit

Prints each step's median and p90 and the total, in ms.

--trace-cli splits the CLI's side instead (exec+ and what follows it), from
`strace -ttt -T` of the `msb` process alone (never the shim or the runtime:
runsc's ptrace platform would not run under a tracer). strace slows the CLI's
own syscalls, so the CLI's steps read high; the waits (exec, teardown) are
the shim's, the runtime's and the guest's, and read true:

  acquire      the CLI's start to the shim's "ok" read by the library
  connect      the library's return, the exec's set-up, the connection to
               agent.sock
  hello        HELLO to the relay and its answer (the relay answers alone)
  exec         the exec's OPEN sent to its last frame (exit) received: the
               relay to the agent, the agent's fork, the child's set-up and
               execve, /bin/true, the exit back through the relay
  release      the exec's outcome checks, the connection closed, dispose up
               to its SIGTERM to the shim (state root, flock, labels, pidfd)
  teardown     the SIGTERM to the shim's exit seen on its pidfd: the shim's
               stop (kill, cgroup, mounts, files) and its own exit
  purge+exit   the library's purge (state directory removed), the CLI's exit

Never a test.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pct(v, q):
    s = sorted(v)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def parse(line):
    f = line.split()
    kv = dict(x.split("=", 1) for x in f[1:])
    mono = int(kv.pop("mono"))
    kv.pop("runtime", None)
    return f[0], [(k, float(v)) for k, v in kv.items()], mono


def one(msb, cfg, log):
    if os.path.exists(log):
        os.unlink(log)
    t0 = time.monotonic_ns()
    p = subprocess.run([msb, "run", "--config", cfg, "--min-isolation", "container", "--",
                        "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=120)
    t1 = time.monotonic_ns()
    if p.returncode != 0:
        raise RuntimeError(f"msb run exited {p.returncode}: {p.stderr[-300:]!r}")
    lines = {}
    for line in open(log):
        what, steps, mono = parse(line)
        lines[what] = (steps, mono)
    up, up_mono = lines["start"]
    down, down_mono = lines["stop"]
    steps = [("cli+acquire", (up_mono - t0) / 1e6)]
    steps += up
    up_end = up_mono + sum(v for _, v in up) * 1e6
    steps.append(("exec+", (down_mono - up_end) / 1e6))
    steps += [(k + "(-)" if k == "cgroup" else k, v) for k, v in down]
    down_end = down_mono + sum(v for _, v in down) * 1e6
    steps.append(("exit+", (t1 - down_end) / 1e6))
    steps.append(("total", (t1 - t0) / 1e6))
    return steps


def trace_one(msb, cfg, out):
    """One `msb run` under strace -ttt -T; the CLI's steps in ms."""
    if os.path.exists(out):
        os.unlink(out)
    p = subprocess.run(["strace", "-ttt", "-T", "-o", out, "-e",
                        "trace=execve,read,connect,sendto,recvfrom,pidfd_send_signal,poll,"
                        "exit_group", msb, "run", "--config", cfg, "--min-isolation",
                        "container", "--", "true"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"msb run exited {p.returncode}: {p.stderr[-300:]!r}")
    lines = [(float(x.split(" ", 1)[0]), x.split(" ", 1)[1]) for x in open(out)
             if x[:1].isdigit()]
    t = {"start": lines[0][0]}
    sock = None
    for i, (ts, call) in enumerate(lines):
        if "ok" not in t and call.startswith("read(") and '"ok\\n"' in call:
            t["ok"] = ts
        elif "ok" in t and "connect" not in t and call.startswith("connect(") and \
                "agent.sock" in call:
            t["connect"] = ts
            sock = call[len("connect("):].split(",", 1)[0]
        elif sock and call.startswith(f"sendto({sock},"):
            t.setdefault("hello_sent", ts)
            if ts != t["hello_sent"]:
                t.setdefault("exec_sent", ts)
        elif sock and call.startswith(f"recvfrom({sock},") and "exec_sent" in t and \
                "term" not in t:
            t["exec_done"] = ts
        elif sock and call.startswith(f"recvfrom({sock},") and "hello_sent" in t:
            t.setdefault("hello_done", ts)
        elif call.startswith("pidfd_send_signal(") and "SIGTERM" in call:
            t["term"] = ts
            for ts2, call2 in lines[i + 1:]:
                if call2.startswith("poll("):
                    t["gone"] = ts2 + float(call2.rsplit("<", 1)[1].rstrip(">\n"))
                    break
        elif call.startswith("exit_group("):
            t["exit"] = ts
    ms = lambda a, b: (t[b] - t[a]) * 1000  # noqa: E731
    return [("acquire", ms("start", "ok")), ("connect", ms("ok", "connect")),
            ("hello", ms("hello_sent", "hello_done")), ("exec", ms("exec_sent", "exec_done")),
            ("release", ms("exec_done", "term")), ("teardown", ms("term", "gone")),
            ("purge+exit", ms("gone", "exit")), ("total", ms("start", "exit"))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--runtimes", default="runsc,crun")
    ap.add_argument("--idle-ms", type=float, default=150)
    ap.add_argument("--trace-cli", action="store_true",
                    help="split the CLI's side with strace (see above)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("oci_breakdown: needs root")
    if args.trace_cli and not shutil.which("strace"):
        sys.exit("oci_breakdown: --trace-cli needs strace")
    msb = os.path.join(args.build, "cli", "msb")
    os.environ.setdefault("MSB_OCI_SHIM", os.path.join(args.build, "src", "backends", "oci",
                                                       "msb-oci-shim"))
    os.environ.setdefault("MSB_AGENT", os.path.join(args.build, "agent", "msb-agent"))
    tmp = tempfile.mkdtemp(prefix="msb-oci-breakdown-", dir="/tmp")
    os.chmod(tmp, 0o711)
    log = os.path.join(tmp, "timing.log")
    os.environ["MSB_OCI_TIMING"] = log
    try:
        for rt in args.runtimes.split(","):
            if not shutil.which(rt):
                print(f"== {rt}: not in PATH")
                continue
            cfg = os.path.join(tmp, f"{rt}.json")
            with open(cfg, "w") as f:
                json.dump({"type": "oci", "runtime": rt,
                           "state_dir": os.path.join(tmp, "state")}, f)
            one(msb, cfg, log)  # warm-up, untimed
            runs = []
            for _ in range(args.n):
                time.sleep(args.idle_ms / 1000)
                runs.append(trace_one(msb, cfg, os.path.join(tmp, "strace.txt"))
                            if args.trace_cli else one(msb, cfg, log))
            print(f"== {rt} (n={args.n}, {args.idle_ms:g} ms idle before each; ms)")
            print("| step | p50 | p90 |")
            print("| --- | ---: | ---: |")
            for i, (name, _) in enumerate(runs[0]):
                v = [r[i][1] for r in runs]
                print(f"| {name} | {pct(v, 0.5):.2f} | {pct(v, 0.9):.2f} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
