#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Hold N idle `ns` sandboxes at once and say what each costs and what limits N.

    bench/hold_many.py [--build DIR] [-n N] [--jobs J] [--state-dir DIR] [--json OUT]

Issue 17's target: 2,000 idle sandboxes held at once on this machine, with
host Pss and kernel memory per sandbox, what limits the count and how far it
is from 10,000. Needs root (the ns backend as root: one cgroup per sandbox).

It starts N sandboxes with `msb acquire` (one conversation, N agents, so one
`msb purge` takes them all down), J at a time, then, with all of them idle:

* host memory: Pss, Rss and USS summed over every msb-shim and msb-agent of
  the state root (/proc/PID/smaps_rollup), and the host-wide growth of Slab
  (reclaimable and not), PageTables and KernelStack from /proc/meminfo, and
  the drop of MemAvailable - per sandbox;
* what each sandbox holds of every limited kernel resource: processes and
  threads (kernel.pid_max, kernel.threads-max, RLIMIT_NPROC), open files of
  the shims and agents (fs.file-max, each process's RLIMIT_NOFILE), user,
  mount, pid, net, ipc, uts and cgroup namespaces (user.max_*_namespaces),
  cgroups per controller (/proc/cgroups), inotify instances
  (fs.inotify.max_user_instances, per user), and the mounts of one sandbox's
  mount namespace (fs.mount-max is per namespace);
* the memory charged to the sandboxes' own memory cgroups (v1
  memory.usage_in_bytes and memory.kmem.usage_in_bytes), per sandbox;
* for each limit, the count of sandboxes at which it would stop the next
  one: (limit - what the rest of the host held before) / (use per
  sandbox), and that against 10,000;
* then one exec in every sandbox (each still serves), a purge of all of them,
  and a check that nothing is left: no process of the state root, no cgroup
  named for it, no state directory, MemAvailable back.

Prints one JSON object (and writes it to --json). The machine is shared:
the host-wide memory deltas include whatever else moved meanwhile; the load
is printed beside them. Standard library only.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS_KINDS = ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def meminfo():
    out = {}
    for line in read("/proc/meminfo", "").splitlines():
        k, _, v = line.partition(":")
        out[k] = int(v.split()[0])
    return out


def cgroup_counts():
    out = {}
    for line in read("/proc/cgroups", "").splitlines()[1:]:
        name, _, num, enabled = line.split()
        if enabled == "1":
            out[name] = int(num)
    return out


def procs_of(state_root):
    """pid -> exe name of every msb-shim / msb-agent of this state root: a shim
    names it in its arguments, an agent is a shim's child."""
    shims, agents = {}, {}
    table = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        raw = read(f"/proc/{pid}/cmdline", None)
        stat = read(f"/proc/{pid}/stat", None)
        if raw is None or stat is None:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        table[int(pid)] = (raw, ppid)
    for pid, (raw, _) in table.items():
        args = raw.split("\0")
        if os.path.basename(args[0]) == "msb-shim" and f"{state_root}/" in raw:
            shims[pid] = "msb-shim"
    for pid, (raw, ppid) in table.items():
        if ppid in shims:
            agents[pid] = os.path.basename(raw.split("\0")[0]) or "?"
    return {**shims, **agents}


def smaps(pid):
    out = {"Pss": 0, "Rss": 0, "Private_Clean": 0, "Private_Dirty": 0}
    for line in read(f"/proc/{pid}/smaps_rollup", "").splitlines():
        k, _, v = line.partition(":")
        if k in out:
            out[k] = int(v.split()[0])
    return out


def threads(pid):
    for line in read(f"/proc/{pid}/status", "").splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def inotify_instances(pids):
    n = 0
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                        n += 1
                except OSError:
                    pass
        except OSError:
            pass
    return n


def namespaces(pids):
    """Distinct namespaces of each kind the processes are in, less this
    process's own."""
    host = {k: os.readlink(f"/proc/self/ns/{k}") for k in NS_KINDS}
    seen = {k: set() for k in NS_KINDS}
    for pid in pids:
        for k in NS_KINDS:
            try:
                ns = os.readlink(f"/proc/{pid}/ns/{k}")
            except OSError:
                continue
            if ns != host[k]:
                seen[k].add(ns)
    return {k: len(v) for k, v in seen.items()}


def our_cgroups(state_root):
    """The cgroup directories named for this state root's sandboxes (the
    shim's naming: msb-<name>-<8 hex of SHA-256 of <root>/ns/<name>>)."""
    found = []
    base = "/sys/fs/cgroup"
    for ctrl in os.listdir(base) if os.path.isdir(base) else []:
        top = os.path.join(base, ctrl)
        if os.path.islink(top) or not os.path.isdir(top):
            continue
        for root, dirs, _ in os.walk(top):
            for d in dirs:
                parts = d.split("-")
                if len(parts) == 3 and parts[0] == "msb":
                    path = f"{state_root}/ns/msb-{parts[1]}"
                    if hashlib.sha256(path.encode()).hexdigest()[:8] == parts[2]:
                        found.append(os.path.join(root, d))
            if root.count("/") > top.count("/") + 4:
                dirs[:] = []
    return found


def memcg_kib(dirs):
    """Summed over the sandboxes' memory cgroups (v1): the memory charged
    to them (user and kernel pages), and the kernel part alone."""
    usage = kmem = 0
    for d in dirs:
        if "/memory/" not in d:
            continue
        for name, acc in (("memory.usage_in_bytes", "u"), ("memory.kmem.usage_in_bytes", "k")):
            v = read(os.path.join(d, name))
            if v and v.strip().isdigit():
                if acc == "u":
                    usage += int(v)
                else:
                    kmem += int(v)
    return usage // 1024, kmem // 1024


def host_threads():
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                n += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                pass
    return n


def limits():
    def num(path):
        v = read(path)
        return int(v.split()[0]) if v and v.split()[0].lstrip("-").isdigit() else None
    out = {
        "kernel.pid_max": num("/proc/sys/kernel/pid_max"),
        "kernel.threads-max": num("/proc/sys/kernel/threads-max"),
        "fs.file-max": num("/proc/sys/fs/file-max"),
        "fs.nr_open": num("/proc/sys/fs/nr_open"),
        "fs.mount-max": num("/proc/sys/fs/mount-max"),
        "fs.inotify.max_user_instances": num("/proc/sys/fs/inotify/max_user_instances"),
        "RLIMIT_NOFILE": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
        "RLIMIT_NPROC": list(resource.getrlimit(resource.RLIMIT_NPROC)),
    }
    for k in NS_KINDS:
        out[f"user.max_{k}_namespaces"] = num(f"/proc/sys/user/max_{k}_namespaces")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--state-dir")
    ap.add_argument("--json")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("hold_many.py: needs root (one cgroup per sandbox)")
    msb = os.path.join(a.build, "cli", "msb")
    # On a tmpfs, as root's default /run/msb is.
    state = a.state_dir or tempfile.mkdtemp(prefix="/run/msb-many-")
    # No configuration file, no pool: N sandboxes of one conversation.
    env = dict(os.environ, MSB_CONFIG="")
    base = ["--state-dir", state, "--min-isolation", "container"]
    result = {"n": a.n, "state_root": state, "limits": limits(),
              "load_before": read("/proc/loadavg", "").split()[:3]}

    mi0, cg0 = meminfo(), cgroup_counts()
    threads0 = host_threads()
    files0 = int(read("/proc/sys/fs/file-nr", "0").split()[0])
    t0 = time.monotonic()
    failures = []

    def acquire(i):
        t = time.monotonic()
        p = subprocess.run([msb, "acquire", *base, "--thread", "many", "--agent", f"a{i}"],
                           env=env, capture_output=True, timeout=300)
        return i, p.returncode, p.stderr.decode()[-300:], time.monotonic() - t

    times = []
    try:
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
            for i, rc, err, dt in ex.map(acquire, range(a.n)):
                if rc != 0:
                    failures.append(f"acquire {i}: {err.strip()}")
                    if len(failures) >= 5:
                        break
                else:
                    times.append(dt * 1000)
        result["acquired"] = len(times)
        result["acquire_all_s"] = round(time.monotonic() - t0, 1)
        times.sort()
        if times:
            result["acquire_p50_ms"] = round(times[len(times) // 2], 2)
            result["acquire_p99_ms"] = round(times[min(len(times) - 1,
                                                       int(len(times) * .99))], 2)
        time.sleep(2)  # idle

        pids = procs_of(state)
        mem = {"Pss": 0, "Rss": 0, "USS": 0}
        nthreads = nfds = 0
        for pid in pids:
            s = smaps(pid)
            mem["Pss"] += s["Pss"]
            mem["Rss"] += s["Rss"]
            mem["USS"] += s["Private_Clean"] + s["Private_Dirty"]
            nthreads += threads(pid)
            nfds += fds(pid)
        mi1, cg1 = meminfo(), cgroup_counts()
        n = max(1, len(times))
        kinds = sorted(set(pids.values()))
        result["processes"] = {k: sum(1 for v in pids.values() if v == k) for k in kinds}
        result["held"] = {
            "processes": len(pids), "threads": nthreads, "fds": nfds,
            "inotify": inotify_instances(pids), "namespaces": namespaces(pids),
            "cgroups": {k: cg1.get(k, 0) - cg0.get(k, 0) for k in cg1},
            "cgroup_dirs_named_for_root": len(our_cgroups(state)),
        }
        # One sandbox's own mount table (fs.mount-max counts per namespace).
        agent = next((p for p, k in pids.items() if k != "msb-shim"), None)
        mounts = len(read(f"/proc/{agent}/mountinfo", "").splitlines()) if agent else 0
        result["held"]["mounts_in_one_sandbox"] = mounts
        per = {
            "pss_kib": mem["Pss"] / n, "rss_kib": mem["Rss"] / n, "uss_kib": mem["USS"] / n,
            "slab_kib": (mi1["Slab"] - mi0["Slab"]) / n,
            "slab_unreclaimable_kib": (mi1["SUnreclaim"] - mi0["SUnreclaim"]) / n,
            "pagetables_kib": (mi1["PageTables"] - mi0["PageTables"]) / n,
            "kernelstack_kib": (mi1["KernelStack"] - mi0["KernelStack"]) / n,
            "memavailable_drop_kib": (mi0["MemAvailable"] - mi1["MemAvailable"]) / n,
        }
        cg_usage, cg_kmem = memcg_kib(our_cgroups(state))
        per["memcg_charged_kib"] = cg_usage / n
        per["memcg_kernel_kib"] = cg_kmem / n
        result["per_sandbox"] = {k: round(v, 1) for k, v in per.items()}
        result["per_sandbox"]["processes"] = round(len(pids) / n, 2)
        result["per_sandbox"]["threads"] = round(nthreads / n, 2)
        result["per_sandbox"]["fds"] = round(nfds / n, 2)

        # What stops the count: limit / use per sandbox, for each limit.
        lim = result["limits"]
        ceil = {}

        def cap(name, limit, use):
            if limit and use > 0:
                ceil[name] = int(limit / use)
        # What the rest of the host held before the first sandbox is not ours.
        result["host_before"] = {"threads": threads0, "open_files": files0}
        cap("kernel.pid_max (processes and threads)", lim["kernel.pid_max"] - threads0,
            nthreads / n)
        cap("kernel.threads-max", lim["kernel.threads-max"] - threads0, nthreads / n)
        cap("fs.file-max", lim["fs.file-max"] - files0, nfds / n)
        cap("MemAvailable (host)", mi0["MemAvailable"], per["memavailable_drop_kib"])
        for k in NS_KINDS:
            cap(f"user.max_{k}_namespaces", lim[f"user.max_{k}_namespaces"],
                result["held"]["namespaces"][k] / n)
        cap("fs.inotify.max_user_instances", lim["fs.inotify.max_user_instances"],
            result["held"]["inotify"] / n)
        for k, v in result["held"]["cgroups"].items():
            cap(f"cgroups ({k}, 65535 per v1 hierarchy level)", 65535, v / n)
        result["ceiling"] = dict(sorted(ceil.items(), key=lambda kv: kv[1]))
        first = next(iter(result["ceiling"].items()), None)
        result["limited_by"] = first[0] if first else None
        result["max_sandboxes"] = first[1] if first else None
        result["of_10000"] = round(first[1] / 10000, 2) if first else None

        # Every one still serves.
        t1 = time.monotonic()

        def exec_true(i):
            p = subprocess.run([msb, "exec", *base, "--thread", "many", "--agent", f"a{i}",
                                "--", "true"], env=env, capture_output=True, timeout=300)
            return p.returncode == 0
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
            result["served_exec"] = sum(ex.map(exec_true, range(len(times))))
        result["exec_all_s"] = round(time.monotonic() - t1, 1)
    finally:
        t2 = time.monotonic()
        p = subprocess.run([msb, "purge", *base[:2], "--scope", "cli", "--thread", "many"],
                           env=env, capture_output=True, timeout=1800)
        result["purge"] = p.stdout.decode().strip() or p.stderr.decode().strip()
        result["purge_s"] = round(time.monotonic() - t2, 1)
        time.sleep(1)
        left = {"processes": len(procs_of(state)), "cgroups": len(our_cgroups(state)),
                "state": sorted(os.listdir(os.path.join(state, "ns")))
                if os.path.isdir(os.path.join(state, "ns")) else []}
        result["left_behind"] = left
        result["memavailable_after_purge_drop_kib"] = \
            mi0["MemAvailable"] - meminfo()["MemAvailable"]
        if not a.state_dir and not any(left.values()):
            shutil.rmtree(state, ignore_errors=True)
    result["failures"] = failures
    result["load_after"] = read("/proc/loadavg", "").split()[:3]
    text = json.dumps(result, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    ok = not failures and not any(result["left_behind"].values()) and \
        result.get("served_exec") == result.get("acquired") == a.n
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
