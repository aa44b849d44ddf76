"""A leak checker: what a sandbox could leave on the host.

After dispose nothing may remain (DESIGN §8): no process, no mount, no
cgroup, no socket, no state directory. `Snapshot.take(state_root)` records
each of those; `snapshot.leaked_since(before)` lists what is new.
"""
import hashlib
import os


def _processes(state_root):
    """msb-shim processes of this state root, and the agents they hold."""
    procs = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        procs[int(pid)] = (cmd, int(fields[1]), fields[19])
    shims = {pid for pid, (cmd, _, _) in procs.items()
             if "msb-shim" in cmd and f"--state {state_root}/" in cmd}
    out = {}
    for pid, (cmd, ppid, start) in procs.items():
        # An agent whose shim is gone (reparented to init) is a leak whoever made it.
        is_agent = cmd.split(" ", 1)[0].endswith("msb-agent")  # not a shim's --agent argument
        if pid in shims or (is_agent and (ppid in shims or ppid == 1)):
            out[(pid, start)] = cmd
    return out


def _mounts(state_root):
    with open("/proc/self/mountinfo") as f:
        return {line.split()[4] for line in f
                if state_root in line or "/msb-" in line.split()[4]}


def _ours(leaf, state_root):
    """A sandbox's cgroup leaf is `<name>-<digest>`, the digest the first four
    bytes of SHA-256 over its state directory (shim/msb-shim.c): only this
    state root's leaves are compared, so tests running beside ours do not
    show up as our leaks."""
    name, _, digest = leaf.rpartition("-")
    want = hashlib.sha256(f"{state_root}/ns/{name}".encode()).hexdigest()[:8]
    return bool(name) and digest == want


def _cgroups(state_root):
    found = set()
    base = "/sys/fs/cgroup"
    for ctrl in os.listdir(base) if os.path.isdir(base) else []:
        top = os.path.join(base, ctrl)
        if os.path.islink(top) or not os.path.isdir(top):
            continue
        for root, dirs, _ in os.walk(top):
            for d in dirs:
                if d.startswith("msb-") and _ours(d, state_root):
                    found.add(os.path.join(root, d))
            # Only look a few levels down: msb's cgroups live near the top.
            if root.count("/") > top.count("/") + 2:
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
