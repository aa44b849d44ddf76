"""A leak checker: what a sandbox could leave on the host.

After dispose nothing may remain (DESIGN §8): no process, no mount, no
cgroup, no socket, no state directory. `Snapshot.take(state_root)` records
each of those; `snapshot.leaked_since(before)` lists what is new.
"""
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MSB = os.path.join(os.environ.get("MSB_BUILD", os.path.join(ROOT, "build")), "cli", "msb")


def _processes(state_root):
    """msb-shim processes of this state root, and the agents they hold."""
    procs = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                raw = f.read()
            cmd = raw.replace(b"\0", b" ").decode(errors="replace").strip()
            exe = os.path.basename(raw.split(b"\0", 1)[0].decode(errors="replace"))
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        procs[int(pid)] = (cmd, int(fields[1]), fields[19], exe)
    shims = {pid for pid, (cmd, _, _, exe) in procs.items()
             if exe == "msb-shim" and f"--state {state_root}/" in cmd}
    out = {}
    for pid, (cmd, ppid, start, exe) in procs.items():
        # An agent whose shim is gone (reparented to init) is a leak whoever made it.
        # Judged by the program's own name: another root's shim names the agent
        # in its arguments (--agent .../msb-agent) and is reparented to init too.
        if pid in shims or (exe == "msb-agent" and (ppid in shims or ppid == 1)):
            out[(pid, start)] = cmd
    return out


# The private engines of tests/e2e/test_engine.py (dockerd, podman) keep
# their own mounts under these roots: theirs, not msb's.
ENGINE_ROOTS = ("/tmp/engine-dk-", "/tmp/msb-dk-", "/tmp/msb-pm-", "/tmp/engine-pm-")


def _mounts(state_root):
    with open("/proc/self/mountinfo") as f:
        return {line.split()[4] for line in f
                if (state_root in line or "/msb-" in line.split()[4])
                and not line.split()[4].startswith(ENGINE_ROOTS)}


def _cgroups(state_root):
    """msb cgroup leaves of this state root: a leaf is msb-<name>-<digest>,
    the digest being the first 8 hex of SHA-256 of <root>/ns/<name> (the
    shim's naming), so sandboxes of other state roots - other test runs going
    on at the same time - are not counted."""
    found = set()
    base = "/sys/fs/cgroup"
    for ctrl in os.listdir(base) if os.path.isdir(base) else []:
        top = os.path.join(base, ctrl)
        if os.path.islink(top) or not os.path.isdir(top):
            continue
        for root, dirs, _ in os.walk(top):
            for d in dirs:
                parts = d.split("-")
                if len(parts) == 3 and parts[0] == "msb":
                    name = f"msb-{parts[1]}"
                    digest = hashlib.sha256(f"{state_root}/ns/{name}".encode()).hexdigest()
                    if digest[:8] == parts[2]:
                        found.add(os.path.join(root, d))
            # Only look a few levels down: msb's cgroups live near the top.
            if root.count("/") > top.count("/") + 4:
                dirs[:] = []
    return found


def _state(state_root):
    ns = os.path.join(state_root, "ns")
    return set(os.listdir(ns)) if os.path.isdir(ns) else set()


class Snapshot:
    def __init__(self, state_root):
        self.state_root = state_root
        self.processes = _processes(state_root)
        self.mounts = _mounts(state_root)
        self.cgroups = _cgroups(state_root)
        self.state = _state(state_root)

    @classmethod
    def take(cls, state_root):
        return cls(state_root)

    def leaked_since(self, before):
        leaks = []
        for k, cmd in self.processes.items():
            if k not in before.processes:
                leaks.append(f"process {k[0]}: {cmd}")
        leaks += [f"mount {m}" for m in self.mounts - before.mounts]
        leaks += [f"cgroup {c}" for c in self.cgroups - before.cgroups]
        leaks += [f"state {s}" for s in self.state - before.state]
        return leaks


def sandbox_dirs(ns_dir):
    """The sandboxes' state directories under <root>/ns: all but `pool`,
    the warm pool's, whose members are ready for the next run
    (docs/pool.md; drain_pool takes them down)."""
    return [d for d in os.listdir(ns_dir) if d != "pool"]


def unpooled(rows):
    """The rows of `msb ls --json` but the warm pool's (state `pooled`)."""
    return [r for r in rows if r.get("state") != "pooled"]


def drain_pool(state_root):
    """Drain the warm pool `msb run`, `msb serve` and `msb mcp` keep by
    default (docs/pool.md): its sandboxes are ready for the next run, not
    left behind - but only if `msb pool drain` takes every one of them down
    and removes it, which the leak check that follows then verifies.
    Returns what went wrong, or None."""
    if not os.path.isdir(os.path.join(state_root, "ns", "pool")):
        return None
    p = subprocess.run([MSB, "pool", "drain", "--state-dir", state_root], capture_output=True,
                       timeout=120, env=dict(os.environ, MSB_CONFIG=""))
    return None if p.returncode == 0 else f"msb pool drain: {p.stderr.decode().strip()}"


def sweep(state_root):
    """Kill whatever a test left running under `state_root`, so that one
    failure does not cascade into the next test."""
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f"--state {state_root}/".encode() in f.read().replace(b"\0", b" "):
                    os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def checked_state_root(prefix, leaked=None):
    """A fresh state root for one test (use as `yield from` in a fixture).
    Afterwards the warm pool is drained and what the test left behind fails
    it, after a sweep; a test that asserts cleanliness itself has already
    checked. `leaked(root, before)`
    replaces the default comparison."""
    root = tempfile.mkdtemp(prefix=prefix)
    before = Snapshot.take(root)
    yield root
    failed = drain_pool(root)
    leaks = leaked(root, before) if leaked else Snapshot.take(root).leaked_since(before)
    leaks += [failed] if failed else []
    sweep(root)
    shutil.rmtree(root, ignore_errors=True)
    assert not leaks, f"left behind: {leaks}"
