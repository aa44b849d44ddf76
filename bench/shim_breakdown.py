#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Where a cold `ns` sandbox's milliseconds go, from msb-shim's own log.

    shim_breakdown.py --shim PATH --agent PATH [--runs N] [--idle-ms MS]

Starts msb-shim directly (the way the backend does - posix_spawn, --daemon -
minus the router and the state-dir labels) N times back to back and N times
with MS of idle before each start, with the configuration the backend writes
(image host, the default limits), and reads the line the shim logs once the
sandbox is ready:

    ready, init pid P, cgroup vV: T ms (clone C, maps M, cgroup setup S,
    attach A, then waited W); monotonic ns: main M, spawn S, ready R

to main: posix_spawn here to the shim's main() (exec of the static binary,
its --daemon fork); shim setup: main() to the spawn (configuration, setsid,
state files, work dir, sockets, cgroup plan); then the spawn: total, of
which clone (clone3 into the new namespaces), maps (the id maps), cgroup
setup (creating the cgroups and writing the limits, before the clone),
attach (the parent moving the child in: none any more - on v1 the child
moves itself through its `tasks` files, inside "waited"), waited (the
child's own work until it execs the agent: its cgroups, rootfs mounts,
pivot_root, /proc, /dev); ready to ok: the log line to "ok" read here (the
init's pid file, the report). "exec to ok" is the whole: from posix_spawn of
the shim to its "ok" on the ready pipe; "fork exec" is a posix_spawn of
/bin/true after each run, the baseline under the same load. Each shim is
sent SIGTERM and waited for after its run; the state directories are
removed. Prints medians and p90s.
"""
import argparse
import json
import os
import re
import select
import signal
import sys
import tempfile
import time

READY = re.compile(r"ready, init pid \d+, cgroup v(\d): ([\d.]+) ms \(clone ([\d.]+), "
                   r"maps ([\d.]+), cgroup setup ([\d.]+), attach ([\d.]+), then waited "
                   r"([\d.]+)\)(?:; monotonic ns: main (\d+), spawn (\d+), ready (\d+))?")
FIELDS = ("total", "clone", "maps", "cgroup_setup", "attach", "waited")
# From the monotonic stamps (time.perf_counter_ns is CLOCK_MONOTONIC here):
# posix_spawn to the shim's main(), main() to the spawn, the log line to "ok"
# read here. The shim's first process forks once and exits (--daemon).
STAMPS = ("to_main", "shim_setup", "ready_to_ok")


def pct(v, q):
    v = sorted(v)
    k = max(1, min(len(v), int(q * len(v) + 0.999999)))
    return v[k - 1]


def one(shim, agent, base):
    state = os.path.join(base, "s")
    log = os.path.join(base, "shim.log")
    cfg = os.path.join(base, "shim.json")
    with open(cfg, "w") as f:
        json.dump({"image": "host", "work_dir": "/maf-sandbox/work", "hostname": "msbb",
                   "memory_bytes": 512 << 20, "pids_max": 512, "cpu_millis": 1000,
                   "writable_bytes": 256 << 20}, f)
    r, w = os.pipe()
    if w == 3:  # dup2 onto itself would keep close-on-exec
        w3 = os.dup(w)
        os.close(w)
        w = w3
    fa = [(os.POSIX_SPAWN_CLOSE, r), (os.POSIX_SPAWN_DUP2, w, 3)]
    argv = [shim, "--daemon", "--state", state, "--agent", agent, "--config", cfg,
            "--ready-fd", "3", "--log", log, "--remove-state-dir"]
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(shim, argv, os.environ, file_actions=fa)
    os.close(w)
    p = select.poll()
    p.register(r, select.POLLIN)
    msg = b""
    if p.poll(30000):
        msg = os.read(r, 512)
    t1 = time.perf_counter_ns()
    os.close(r)
    os.waitpid(pid, 0)  # --daemon: the first process, gone at once
    stop_shim(state)
    if not msg.startswith(b"ok"):
        return None, msg.decode("utf-8", "replace").strip()
    text = open(log).read()
    m = READY.search(text)
    if not m:
        return None, "no ready line in the shim's log: " + text.strip()[:200]
    row = {"version": int(m.group(1)), "exec_to_ok": (t1 - t0) / 1e6}
    for k, g in zip(FIELDS, m.groups()[1:7]):
        row[k] = float(g)
    if m.group(8):
        main, spawn, ready = (int(m.group(i)) for i in (8, 9, 10))
        row["to_main"] = (main - t0) / 1e6
        row["shim_setup"] = (spawn - main) / 1e6
        row["ready_to_ok"] = (t1 - ready) / 1e6
    return row, None


def stop_shim(state):
    """SIGTERM the shim named in state/shim.pid and wait until it is gone
    (it is not our child: --daemon)."""
    try:
        with open(os.path.join(state, "shim.pid")) as f:
            pid = int(f.read().split()[0])
        fd = os.pidfd_open(pid)
    except (OSError, ValueError):
        return
    try:
        signal.pidfd_send_signal(fd, signal.SIGTERM)
        select.select([fd], [], [], 10)
    except OSError:
        pass
    finally:
        os.close(fd)


def fork_exec_ms():
    """One posix_spawn + wait of /bin/true: the baseline under the same load."""
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn("/bin/true", ["/bin/true"], os.environ)
    os.waitpid(pid, 0)
    return (time.perf_counter_ns() - t0) / 1e6


def series(args, idle_ms):
    rows, errors = [], []
    for _ in range(args.runs):
        if idle_ms:
            time.sleep(idle_ms / 1000)
        with tempfile.TemporaryDirectory(prefix="msbb-shim-") as base:
            row, err = one(args.shim, args.agent, base)
        if row:
            row["fork_exec"] = fork_exec_ms()
            rows.append(row)
        else:
            errors.append(err)
    return rows, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shim", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--idle-ms", type=int, default=100)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    out = {}
    for name, idle in (("back to back", 0), ("after %d ms idle" % args.idle_ms, args.idle_ms)):
        rows, errors = series(args, idle)
        out[name] = {"rows": rows, "errors": errors}
        print("msb-shim, %s: %d/%d ok%s" % (name, len(rows), args.runs,
                                             " (cgroup v%d)" % rows[0]["version"] if rows else ""))
        if errors:
            print("  first error: %s" % errors[0])
        if not rows:
            continue
        for k in ("exec_to_ok",) + STAMPS + FIELDS + ("fork_exec",):
            v = [r[k] for r in rows if k in r]
            if not v:
                continue
            print("  %-14s p50 %7.2f ms   p90 %7.2f ms" % (k.replace("_", " "), pct(v, .5),
                                                        pct(v, .9)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
