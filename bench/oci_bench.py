#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The `oci` backend beside the bare runtime it drives, side by side in one run.

    bench/oci_bench.py [--build DIR] [-n N] [--runtimes runsc,crun] [--json OUT]
                       [--baseline-shim PATH] [--baseline-agent PATH]

Needs root, and the runtimes (scripts/install-deps). For each runtime R:

  run         `msb run --config {"type":"oci","runtime":R} -- true`: a
              call-scoped sandbox acquired, /bin/true run in it, disposed -
              as `msb run` does it by default, claiming a sandbox of its warm
              pool (docs/pool.md: started ahead, never used, renamed onto the
              call's key), the pool then filled again behind it in the
              background; after each such run the bench waits, untimed, until
              the pool is whole again, so that no refill runs during another
              case's timing. `msb run, no pool` is the same with pool_size 0:
              a truly cold start, the sandbox made for the call. Each beside
              `R run` of a bundle whose process is /bin/true (create,
              start, wait, delete): what a user runs instead; and beside
              `R run` of msb's own bundle (`R run, same bundle`): the
              config.json msb's shim hands the runtime - user namespace,
              seccomp, masked and read-only paths, every mount - with
              /bin/true for the agent, over a plain copy of msb's root
              skeleton (no overlay, no cgroup, no shim, no agent): the
              runtime's own work for msb's sandbox, so the difference is
              msb's overhead alone.
  acquire     `msb acquire` of a new key, no pool (the sandbox stays; it is
              disposed untimed): the cold start alone.
  warm exec   `msb exec -- true` into a warm sandbox (a CLI process: acquire
              of the existing sandbox, connect, exec) - beside `R exec` of
              /bin/true into a running container (`R run --detach`, process
              sleep).

The bare bundles are as close to the sandbox's as the runtime's own means
allow: the host's /usr (and /bin, /lib... as the host has them) bound read
only, fresh /proc, pid, network, ipc, uts and mount namespaces; runsc with
--network none and --ignore-cgroups, crun with --cgroup-manager=disabled in a
private mount namespace (a hybrid cgroup2 hierarchy hidden, as msb-oci-shim
does). msb's sandboxes add what the backend always has: a user namespace, an
overlay root with a size-capped tmpfs layer, cgroup limits, the agent.

--baseline-shim PATH adds `msb run (baseline shim)`: the same CLI with another
msb-oci-shim (MSB_OCI_SHIM; say, one built from an older tree), in the same
rounds - a before/after on the same minute of a noisy machine.
--baseline-agent PATH does the same with another msb-agent (MSB_AGENT), and
adds `msb exec (baseline agent)` into a warm sandbox of that agent's; with
both, the baseline cases run both (`(baseline)`).

N runs per case (default 20), the cases of one runtime in a shuffled order
each round; medians and p90s (nearest rank), and each msb case's median over
its bare counterpart's. Everything started is stopped and every temporary
directory removed on exit. Standard library only; never a test.
"""
import argparse
import ctypes
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE, MNT_DETACH = 0x4000, 0x40000, 2
MS_RDONLY, MS_NOSUID, MS_NODEV = 1, 2, 4
_libc = ctypes.CDLL(None, use_errno=True)


def private_mounts():
    """preexec for crun: a mount namespace of its own, the hybrid cgroup2 hidden
    as msb-oci-shim hides it (covered by a tmpfs: no unmount, whose RCU grace
    period would be counted against the bare runtime)."""
    if _libc.unshare(CLONE_NEWNS) != 0:
        os._exit(126)
    _libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
    if os.path.isdir("/sys/fs/cgroup/unified") and _libc.mount(
            b"msb-hidden", b"/sys/fs/cgroup/unified", b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
            b"size=4k,nr_inodes=1,mode=0555") != 0:
        _libc.umount2(b"/sys/fs/cgroup/unified", MNT_DETACH)


def bundle(base, name, args):
    d = os.path.join(base, name)
    rootfs = os.path.join(d, "rootfs")
    os.makedirs(os.path.join(rootfs, "proc"))
    os.makedirs(os.path.join(rootfs, "dev"))
    os.makedirs(os.path.join(rootfs, "usr"))
    mounts = [{"destination": "/proc", "type": "proc", "source": "proc"},
              {"destination": "/usr", "type": "bind", "source": "/usr",
               "options": ["rbind", "ro"]}]
    for top in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
        src = "/" + top
        if os.path.islink(src):
            os.symlink(os.readlink(src), os.path.join(rootfs, top))
        elif os.path.isdir(src):
            os.makedirs(os.path.join(rootfs, top))
            mounts.append({"destination": src, "type": "bind", "source": src,
                           "options": ["rbind", "ro"]})
    spec = {
        "ociVersion": "1.0.2",
        "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": args,
                    "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "cwd": "/",
                    "noNewPrivileges": True},
        "root": {"path": "rootfs", "readonly": True},
        "hostname": "bench",
        "mounts": mounts,
        "linux": {"namespaces": [{"type": t} for t in
                                 ("pid", "network", "ipc", "uts", "mount")]},
    }
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(spec, f)
    return d


def same_bundle(base, name, msb, cfg, thread):
    """msb's own bundle, taken from a live sandbox of `thread` (read through its
    shim's mount namespace), with /bin/true as the process and host-side stand-ins
    for what lives on the shim's private tmpfs."""
    state = json.load(open(cfg))["state_dir"]
    top = os.path.join(state, "oci")
    for n in os.listdir(top):
        d = os.path.join(top, n)
        try:
            pid = int(open(os.path.join(d, "shim.pid")).read().split()[0])
            labels = json.load(open(os.path.join(d, "labels.json")))
        except (OSError, ValueError):
            continue
        if labels.get("thread_id") != thread:
            continue
        via = f"/proc/{pid}/root{os.path.realpath(d)}/run"
        spec = json.load(open(os.path.join(via, "bundle", "config.json")))
        out = os.path.join(base, name)
        os.makedirs(out)
        rootfs = os.path.join(out, "rootfs")
        subprocess.run(["cp", "-a", os.path.join(via, "layer", "skel"), rootfs], check=True)
        uid = os.stat(rootfs).st_uid
        private = os.path.realpath(d)
        for m in spec["mounts"]:
            src = m.get("source", "")
            if m.get("type") == "bind" and src.startswith(private + "/"):
                if m["destination"] == "/tmp":
                    m["source"] = os.path.join(rootfs, "tmp")
                    continue
                stand_in = os.path.join(out, m["destination"].strip("/").replace("/", "_"))
                os.makedirs(stand_in)
                os.chown(stand_in, uid, uid)
                os.chmod(stand_in, 0o1777 if m["destination"] == "/dev/shm" else 0o700)
                m["source"] = stand_in
        spec["root"]["path"] = rootfs
        spec["process"]["args"] = ["/bin/true"]
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(spec, f)
        return out
    raise RuntimeError(f"no live sandbox of thread {thread} under {top}")


def runtime_argv(rt, path, root):
    if rt == "runsc":
        return [path, "--root", root, "--network", "none", "--ignore-cgroups"]
    return [path, "--root", root, "--cgroup-manager=disabled"]


def timed(argv, preexec=None, env=None):
    t = time.perf_counter()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, preexec_fn=preexec, timeout=120, env=env)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{argv[:6]}... exited {p.returncode}: {p.stderr[-300:]!r}")
    return dt * 1000


def pct(v, q):
    s = sorted(v)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def bench_runtime(rt, args, msb, tmp):
    path = shutil.which(rt)
    if not path:
        return {"runtime": rt, "error": "not in PATH"}
    def config(name, **kw):
        state = os.path.join(tmp, f"state-{rt}-{name}")
        os.makedirs(state)
        os.chmod(state, 0o711)
        path = os.path.join(tmp, f"{rt}-{name}.json")
        with open(path, "w") as f:
            json.dump({"type": "oci", "runtime": rt, "state_dir": state, **kw}, f)
        return path
    # Cold cases: no pool. The pooled run: `msb run`'s default pool (2).
    cfg = config("cold", pool_size=0)
    pool_cfg = config("pool")
    common = ["--config", cfg, "--min-isolation", "container"]
    pre = private_mounts if rt == "crun" else None
    rroot = os.path.join(tmp, f"rt-{rt}")
    true_b = bundle(tmp, f"true-{rt}", ["/bin/true"])
    sleep_b = bundle(tmp, f"sleep-{rt}", ["/bin/sleep", "100000"])
    base = runtime_argv(rt, path, rroot)
    if rt == "runsc":  # as msb-oci-shim runs it (docs/internals/oci-backend.md)
        same_base = base + ["--overlay2", "none", "--platform", "ptrace"]
    else:
        same_base = base
    counter = [0]

    def pool_whole():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            p = subprocess.run([msb, "pool", "ls", "--config", pool_cfg, "--json"],
                               capture_output=True)
            if sum(e["pool"]["state"] == "ready" for e in json.loads(p.stdout or b"[]")) >= 2:
                return
            time.sleep(0.01)
        raise RuntimeError("the pool was not whole again within 60 s")

    def msb_run():
        dt = timed([msb, "run", "--config", pool_cfg, "--min-isolation", "container", "--",
                    "true"])
        pool_whole()
        return dt

    def msb_run_cold():
        return timed([msb, "run", *common, "--", "true"])

    base_env = dict(os.environ)
    if args.baseline_shim:
        base_env["MSB_OCI_SHIM"] = args.baseline_shim
    if args.baseline_agent:
        base_env["MSB_AGENT"] = args.baseline_agent
    label = ("baseline" if args.baseline_shim and args.baseline_agent else
             "baseline shim" if args.baseline_shim else "baseline agent")

    def msb_run_baseline():  # no pool: the shims/agents compared start the sandbox
        return timed([msb, "run", *common, "--", "true"], env=base_env)

    def msb_exec_baseline():
        return timed([msb, "exec", *common, "--thread", "warm-base", "--", "true"], env=base_env)

    def msb_acquire():
        counter[0] += 1
        thread = f"acq-{counter[0]}"
        dt = timed([msb, "acquire", *common, "--thread", thread])
        subprocess.run([msb, "dispose", "--config", cfg, "--thread", thread],
                       capture_output=True)
        return dt

    def msb_exec():
        return timed([msb, "exec", *common, "--thread", "warm", "--", "true"])

    def bare_run():
        counter[0] += 1
        return timed(base + ["run", "--bundle", true_b, f"b{counter[0]}"], pre)

    def same_run():
        counter[0] += 1
        return timed(same_base + ["run", "--bundle", same_b, f"s{counter[0]}"], pre)

    def bare_exec():
        return timed(base + ["exec", "warm", "/bin/true"], pre)

    # The warm ones: a sandbox, and a detached container.
    subprocess.run([msb, "acquire", *common, "--thread", "warm"], check=True,
                   capture_output=True)
    if args.baseline_agent:
        subprocess.run([msb, "acquire", *common, "--thread", "warm-base"], check=True,
                       capture_output=True, env=base_env)
    same_b = same_bundle(tmp, f"same-{rt}", msb, cfg, "warm")
    subprocess.run(base + ["run", "--detach", "--bundle", sleep_b, "warm"], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, preexec_fn=pre)
    cases = {"msb run": msb_run, "msb run, no pool": msb_run_cold, f"{rt} run": bare_run,
             f"{rt} run, same bundle": same_run,
             "msb acquire": msb_acquire,
             "msb exec": msb_exec, f"{rt} exec": bare_exec}
    if args.baseline_shim or args.baseline_agent:
        cases[f"msb run ({label})"] = msb_run_baseline
    if args.baseline_agent:
        cases[f"msb exec ({label})"] = msb_exec_baseline
    samples = {k: [] for k in cases}
    try:
        for fn in cases.values():  # warm-up, untimed
            fn()
        for _ in range(args.n):
            order = list(cases)
            random.shuffle(order)
            for k in order:
                samples[k].append(cases[k]())
    finally:
        subprocess.run(base + ["kill", "warm", "KILL"], capture_output=True, preexec_fn=pre)
        time.sleep(0.3)
        subprocess.run(base + ["delete", "--force", "warm"], capture_output=True,
                       preexec_fn=pre)
        subprocess.run([msb, "dispose", "--config", cfg, "--thread", "warm"],
                       capture_output=True)
        subprocess.run([msb, "pool", "drain", "--config", pool_cfg], capture_output=True)
        if args.baseline_agent:
            subprocess.run([msb, "dispose", "--config", cfg, "--thread", "warm-base"],
                           capture_output=True)
    out = {"runtime": rt, "n": args.n, "cases": {}}
    for k, v in samples.items():
        out["cases"][k] = {"p50_ms": round(pct(v, 0.5), 2), "p90_ms": round(pct(v, 0.9), 2)}
    c = out["cases"]
    ratios = {}
    if args.baseline_shim or args.baseline_agent:
        ratios[f"cold run: {label}, no pool / bare run"] = round(
            c[f"msb run ({label})"]["p50_ms"] / c[f"{rt} run"]["p50_ms"], 2)
    if args.baseline_agent:
        ratios[f"warm exec: {label} / bare exec"] = round(
            c[f"msb exec ({label})"]["p50_ms"] / c[f"{rt} exec"]["p50_ms"], 2)
    out["ratios"] = ratios
    out["ratios"] |= {
        "run: msb run / bare run": round(c["msb run"]["p50_ms"] / c[f"{rt} run"]["p50_ms"], 2),
        "cold run: msb run, no pool / bare run": round(
            c["msb run, no pool"]["p50_ms"] / c[f"{rt} run"]["p50_ms"], 2),
        "cold run: msb run, no pool / same bundle": round(
            c["msb run, no pool"]["p50_ms"] / c[f"{rt} run, same bundle"]["p50_ms"], 2),
        "warm exec: msb exec / bare exec": round(c["msb exec"]["p50_ms"] /
                                                 c[f"{rt} exec"]["p50_ms"], 2),
    }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--runtimes", default="runsc,crun")
    ap.add_argument("--json")
    ap.add_argument("--baseline-shim")
    ap.add_argument("--baseline-agent")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("oci_bench: needs root")
    msb = os.path.join(args.build, "cli", "msb")
    os.environ.setdefault("MSB_OCI_SHIM", os.path.join(args.build, "src", "backends", "oci",
                                                       "msb-oci-shim"))
    os.environ.setdefault("MSB_AGENT", os.path.join(args.build, "agent", "msb-agent"))
    tmp = tempfile.mkdtemp(prefix="msb-oci-bench-", dir="/tmp")
    os.chmod(tmp, 0o711)
    results = []
    try:
        for rt in args.runtimes.split(","):
            r = bench_runtime(rt, args, msb, tmp)
            results.append(r)
            print(f"== {rt} (n={args.n}; ms)")
            for k, v in r.get("cases", {}).items():
                print(f"  {k:22} p50 {v['p50_ms']:8.2f}  p90 {v['p90_ms']:8.2f}")
            for k, v in r.get("ratios", {}).items():
                print(f"  {k:42} {v:.2f}x")
            if "error" in r:
                print("  " + r["error"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
