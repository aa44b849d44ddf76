"""The `ns` backend end to end, through the real `msb` binary (issue 3).

Each test gets its own state root; the leak checker compares the host before
and after: no process, mount, cgroup or state directory may remain.
"""
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from leaks import checked_state_root, sandbox_dirs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the ns e2e suite runs as root")

FLOOR = ["--min-isolation", "container"]


@pytest.fixture
def state():
    yield from checked_state_root("/tmp/msb-e2e-")


def sh(msb, state, *cmd, thread="t1", timeout=60, extra=()):
    return msb("exec", "--state-dir", state, *FLOOR, "--thread", thread, *extra, "--",
               *cmd, timeout=timeout)


def table_names(msb, write_json):
    """The backend-type table's names, as the library lists them when a
    backend names no type (not a copy kept here)."""
    router = write_json("untyped.json", {"backends": [{"name": "x"}]})
    spec = write_json("spec.json", {"kind": "k"})
    p = msb("check", "--spec", spec, "--router", router)
    msg = p.stderr.decode() + p.stdout.decode()
    assert "type is required: one of" in msg, msg
    return re.findall(r"`([a-z0-9_-]+)`", msg.split("one of", 1)[1])


def test_doctor_lists_exactly_the_backend_types(msb, write_json):
    names = table_names(msb, write_json)
    assert names[:3] == ["declared", "fake", "ns"] and {"oci", "docker", "wslc", "vm"} <= set(names), names
    p, doc = msb.json("doctor", "--json")
    assert p.returncode == 0, p.stderr
    assert [b["name"] for b in doc["backends"]] == names
    assert all(b["reason"] for b in doc["backends"])
    ns = next(b for b in doc["backends"] if b["name"] == "ns")
    assert ns["ok"] and "container rung" in ns["reason"]
    # Host facilities are what the types' probes tried, each under its
    # type's name: the `vm` row's (qemu, kernel, the KVM probe) are `vm.*`,
    # and there is no bare `kvm` probe of a backend outside the table.
    probes = [pr["name"] for pr in doc["probes"]]
    assert "kvm" not in probes
    assert any(p.startswith("vm.") for p in probes), probes
    text = msb("doctor").stdout.decode().split("backends:\n", 1)[1]
    assert [line.split()[0] for line in text.splitlines()] == names


def test_sandbox_verbs_take_backend_json(msb, state, write_json):
    # --config is the same backend JSON as everywhere: here a fake with the
    # emulated guest and a seeded file, run through the router like ns.
    cfg = write_json("fake.json", {"type": "fake", "posix_guest": True, "seed_files": [
        {"path": "/maf-sandbox/work/hello.txt", "text": "from the seed"}]})
    p = msb("exec", "--config", cfg, "--min-isolation", "none", "--thread", "t", "--", "cat",
            "hello.txt")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"from the seed"
    # The policy is the router's whatever the backend: the fake declares no
    # call scope, so `msb run` (call-scoped) is refused by name.
    p = msb("run", "--config", cfg, "--min-isolation", "none", "--", "true")
    assert p.returncode == 3 and b"SandboxScopeNotEnforced" in p.stderr, p.stderr
    # ns flags write over its keys; the fake has none of them.
    p = msb("run", "--config", cfg, "--min-isolation", "none", "--state-dir", state, "--",
            "true")
    assert p.returncode == 2 and b"unknown key `state_dir`" in p.stderr, p.stderr
    p = msb("ls", "--config", cfg)
    assert p.returncode == 2 and b"is none of them" in p.stderr, p.stderr


def test_default_floor_refuses_and_says_how_to_opt_down(msb, state):
    p = msb("run", "--state-dir", state, "--", "true")
    assert p.returncode == 3
    assert b"SandboxBackendNotPermitted" in p.stderr
    assert b"minimum-isolation floor" in p.stderr
    assert b"--min-isolation container" in p.stderr


def test_run_passes_exit_status_and_bytes(msb, state):
    p = msb("run", "--state-dir", state, *FLOOR, "--", "sh", "-c",
            "printf 'a\\000b\\377'; printf err >&2; exit 7")
    assert p.returncode == 7, p.stderr
    assert p.stdout == b"a\x00b\xff"
    assert p.stderr == b"err"
    # A call-scoped sandbox is gone when the call ends (the warm pool's
    # stay ready for the next run).
    assert sandbox_dirs(os.path.join(state, "ns")) == []


def test_argv_is_passed_natively_9_1(msb, state):
    p = msb("run", "--state-dir", state, *FLOOR, "--", "sh", "-c",
            "printf '%s' \"$1\"", "p", "a b$(echo x)c")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"a b$(echo x)c"
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "x").returncode == 0


def test_reuse_across_processes_and_purge(msb, state):
    a = msb("acquire", "--state-dir", state, *FLOOR, "--thread", "conv")
    b = msb("acquire", "--state-dir", state, *FLOOR, "--thread", "conv")
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    assert a.stdout == b.stdout and len(a.stdout.strip()) == 32
    # Warm: a file written by one exec is seen by the next (one sandbox).
    assert sh(msb, state, "sh", "-c", "echo hi > /tmp/x", thread="conv").returncode == 0
    assert sh(msb, state, "cat", "/tmp/x", thread="conv").stdout == b"hi\n"
    p = msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "conv")
    assert p.returncode == 0 and b"disposed 1" in p.stdout
    c = msb("acquire", "--state-dir", state, *FLOOR, "--thread", "conv")
    assert c.returncode == 0 and c.stdout != a.stdout  # a replacement has a new id (9.29)
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "conv").returncode == 0


def test_racing_acquires_get_one_sandbox_4_15(msb, state):
    def acquire(_):
        return msb("acquire", "--state-dir", state, *FLOOR, "--thread", "race")
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(acquire, range(6)))
    ids = {r.stdout for r in results}
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    assert len(ids) == 1
    ls = json.loads(msb("ls", "--state-dir", state, "--json").stdout)
    assert len(ls) == 1 and ls[0]["alive"]
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "race").returncode == 0


def test_kinds_are_distinct_sandboxes_2_9(msb, state):
    a = msb("acquire", "--state-dir", state, *FLOOR, "--thread", "k", "--kind", "a")
    b = msb("acquire", "--state-dir", state, *FLOOR, "--thread", "k", "--kind", "b")
    assert a.stdout != b.stdout
    p = msb("dispose", "--state-dir", state, "--thread", "k", "--kind", "a")
    assert p.returncode == 0
    ls = json.loads(msb("ls", "--state-dir", state, "--json").stdout)
    assert [e["kind"] for e in ls] == ["b"]
    assert msb("dispose", "--state-dir", state, "--thread", "k").returncode == 0


def test_timeout_kills_the_group_and_reports(msb, state):
    start = time.monotonic()
    p = sh(msb, state, "sh", "-c", "sleep 100 & sleep 100", thread="to",
           extra=("--timeout", "1"))
    elapsed = time.monotonic() - start
    assert p.returncode == 6, p.stderr
    assert b"TimeoutError" in p.stderr
    assert elapsed < 20
    # No survivor: nothing but the agent is left inside.
    q = sh(msb, state, "sh", "-c", "for p in /proc/[0-9]*; do cat $p/comm; done", thread="to")
    names = q.stdout.decode().split()
    assert "sleep" not in names, names
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "to").returncode == 0


def test_output_flood_stops_at_the_budget(msb, state):
    p = sh(msb, state, "sh", "-c", "yes", thread="fl", extra=("--max-output", "1000"))
    assert len(p.stdout) == 1000
    assert b"truncated" in p.stderr
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "fl").returncode == 0


def test_large_output_arrives_exactly(msb, state):
    p = sh(msb, state, "sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' 'x'", thread="big")
    assert p.returncode == 0 and p.stdout == b"x" * 3000000
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "big").returncode == 0


def test_the_inside_sees_nothing_of_the_host(msb, state):
    marker = os.path.join("/root", f"msb-host-marker-{os.getpid()}")
    open(marker, "w").close()
    try:
        script = (
            f"test -e {marker} && echo host-file-visible; "
            "ls /sys/class/net 2>/dev/null || cat /proc/net/dev; "
            "ls -d /proc/[0-9]* | wc -l; "
            "grep -E '^Cap(Eff|Bnd)' /proc/self/status; "
            "test -e /proc/1 || echo pid1-hidden; hostname"
        )
        p = sh(msb, state, "sh", "-c", script, thread="in")
        out = p.stdout.decode()
        assert p.returncode == 0, p.stderr
        assert "host-file-visible" not in out
        assert "eth" not in out and "lo" in out
        assert "CapEff:\t0000000000000000" in out
        assert "CapBnd:\t0000000000000000" in out
        # The agent is in no namespace a workload can see (issue 15 finding 2).
        assert "pid1-hidden" in out
        nprocs = int([line for line in out.splitlines() if line.strip().isdigit()][0])
        assert nprocs < 10, out
    finally:
        os.unlink(marker)
    # mount and ptrace of PID 1 fail; a capability cannot be raised.
    assert sh(msb, state, "sh", "-c", "mount -t tmpfs x /mnt", thread="in").returncode != 0
    code = ("import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
            "PTRACE_ATTACH = 16; r = libc.ptrace(PTRACE_ATTACH, 1, 0, 0); "
            "print('ptrace', r, ctypes.get_errno()); "
            "PR_CAP_AMBIENT, RAISE, CAP_SYS_ADMIN = 47, 2, 21; "
            "r2 = libc.prctl(PR_CAP_AMBIENT, RAISE, CAP_SYS_ADMIN, 0, 0); "
            "print('raise', r2)")
    p = sh(msb, state, "python3", "-c", code, thread="in")
    assert p.returncode == 0, p.stderr
    assert b"ptrace -1" in p.stdout and b"raise -1" in p.stdout
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "in").returncode == 0


def test_a_crashed_workload_leaves_the_agent_serving(msb, state):
    p = sh(msb, state, "sh", "-c", "kill -SEGV $$", thread="cr")
    assert p.returncode == 128 + signal.SIGSEGV
    p = sh(msb, state, "echo", "still here", thread="cr")
    assert p.returncode == 0 and p.stdout == b"still here\n"
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "cr").returncode == 0


def test_killing_the_shim_leaves_nothing_purge_cannot_remove(msb, state):
    assert msb("acquire", "--state-dir", state, *FLOOR, "--thread", "kill").returncode == 0
    ls = json.loads(msb("ls", "--state-dir", state, "--json").stdout)
    name = ls[0]["name"]
    with open(os.path.join(state, "ns", name, "shim.pid")) as f:
        shim = int(f.read().split()[0])
    os.kill(shim, signal.SIGKILL)
    time.sleep(0.5)
    p = msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "kill")
    assert p.returncode == 0, p.stderr


def _state_file(state, name):
    """The one sandbox directory's file `name` (its first field, for pid files)."""
    (d,) = [x for x in os.listdir(os.path.join(state, "ns")) if x.startswith("msb-")]
    return os.path.join(state, "ns", d, name)


def _pid(state, name):
    with open(_state_file(state, name)) as f:
        return int(f.read().split()[0])


def test_a_workload_cannot_reach_its_agent_15_2(msb, state):
    # Issue 15 finding 2: `echo 1000 > /proc/1/oom_score_adj` worked, and a
    # memory fill then got the agent OOM-killed.
    mem = ("--memory", "128M")
    p = sh(msb, state, "sh", "-c",
           "echo keep > /maf-sandbox/work/f; "
           "(echo 1000 > /proc/1/oom_score_adj) 2>/dev/null && echo wrote-score; "
           "cat /proc/1/environ /proc/1/maps 2>/dev/null && echo read-pid1; "
           "kill -TERM 1; kill -KILL 1; echo done",
           thread="oom", extra=mem)
    assert p.returncode == 0 and p.stdout == b"done\n", (p.stdout, p.stderr)
    p = sh(msb, state, "python3", "-c", "x = bytearray(1 << 30)", thread="oom", extra=mem)
    assert p.returncode == 137, (p.returncode, p.stderr)
    assert b"oom_killed" in p.stderr
    with open(f"/proc/{_pid(state, 'init.pid')}/oom_score_adj") as f:
        assert f.read().strip() == "0"
    p = sh(msb, state, "cat", "/maf-sandbox/work/f", thread="oom", extra=mem)
    assert p.returncode == 0 and p.stdout == b"keep\n", p.stderr
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "oom").returncode == 0


def test_a_killed_agent_is_reported_and_keeps_its_files_15_2(msb, state):
    assert sh(msb, state, "sh", "-c", "echo keep > /maf-sandbox/work/f",
              thread="kill").returncode == 0
    pending = subprocess.Popen([msb.path, "exec", "--state-dir", state, *FLOOR, "--thread",
                                "kill", "--", "sleep", "30"], stderr=subprocess.PIPE)
    time.sleep(1)
    os.kill(_pid(state, "init.pid"), signal.SIGKILL)
    _, err = pending.communicate(timeout=30)
    assert pending.returncode == 1 and b"SandboxGone" in err and b"killed by signal 9" in err, err
    # Never a fresh sandbox in its place: refused until disposed of, files kept.
    p = sh(msb, state, "cat", "/maf-sandbox/work/f", thread="kill")
    assert p.returncode == 3 and b"SandboxUnclean" in p.stderr, (p.returncode, p.stderr)
    assert b"killed by signal 9" in p.stderr and b"storage base is kept" in p.stderr
    with open(_state_file(state, "work/f")) as f:
        assert f.read() == "keep\n"
    (entry,) = json.loads(msb("ls", "--state-dir", state, "--json").stdout)
    assert entry["state"] == "dead" and not entry["alive"]
    assert "killed by signal 9" in entry["reason"]
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "kill").returncode == 0
    p = sh(msb, state, "ls", "/maf-sandbox/work", thread="kill")
    assert p.returncode == 0 and p.stdout == b""
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "kill").returncode == 0


# Runs as a child subreaper, so the shim (started fork, fork, exec) becomes
# its child: killed, it stays a zombie until this process reaps it.
ZOMBIE_SHIM = r"""
import ctypes, json, os, signal, subprocess, sys, time
msb, state = sys.argv[1], sys.argv[2]
floor = ["--min-isolation", "container", "--thread", "zombie"]
assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
def run(*args):
    p = subprocess.run([msb, *args], capture_output=True, timeout=60)
    return {"rc": p.returncode, "out": p.stdout.decode(), "err": p.stderr.decode()}
out = {"acquire0": run("acquire", "--state-dir", state, *floor)}
(d,) = [x for x in os.listdir(os.path.join(state, "ns")) if x.startswith("msb-")]
with open(os.path.join(state, "ns", d, "shim.pid")) as f:
    shim = int(f.read().split()[0])
os.kill(shim, signal.SIGKILL)
os.waitid(os.P_PID, shim, os.WEXITED | os.WNOWAIT)
time.sleep(0.3)
with open(f"/proc/{shim}/stat") as f:
    out["shim_state"] = f.read().rsplit(")", 1)[1].split()[0]
out["exec"] = run("exec", "--state-dir", state, *floor, "--", "true")
out["acquire"] = run("acquire", "--state-dir", state, *floor)
out["ls"] = run("ls", "--state-dir", state, "--json")
os.waitpid(shim, 0)
print(json.dumps(out))
"""


def test_a_zombie_shim_is_dead_15_5(msb, state):
    p = subprocess.run([sys.executable, "-c", ZOMBIE_SHIM, msb.path, state],
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["acquire0"]["rc"] == 0, out
    assert out["shim_state"] == "Z", out
    # Not "connection refused", not the dead instance, not "running".
    assert out["exec"]["rc"] == 3 and "SandboxUnclean" in out["exec"]["err"], out["exec"]
    assert "zombie" in out["exec"]["err"], out["exec"]
    assert out["acquire"]["rc"] == 3 and "SandboxUnclean" in out["acquire"]["err"], out
    (entry,) = json.loads(out["ls"]["out"])
    assert entry["state"] == "dead" and not entry["alive"], entry
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread",
               "zombie").returncode == 0


def test_a_stopped_agent_costs_exec_its_own_timeout_15_7(msb, state):
    assert msb("acquire", "--state-dir", state, *FLOOR, "--thread", "stop").returncode == 0
    init = _pid(state, "init.pid")
    os.kill(init, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        p = sh(msb, state, "true", thread="stop", extra=("--timeout", "2"))
        took = time.monotonic() - t0
    finally:
        os.kill(init, signal.SIGCONT)
    assert p.returncode == 6 and b"TimeoutError" in p.stderr, (p.returncode, p.stderr)
    assert took < 6, f"a 2 s exec took {took:.1f} s"  # a fixed 10 s HELLO wait before
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "stop").returncode == 0


def _unprivileged_userns_allowed():
    try:
        with open("/proc/sys/kernel/unprivileged_userns_clone") as f:
            return f.read().strip() == "1"
    except OSError:
        return True  # no such knob: the kernel allows it


@pytest.mark.skipif(not shutil.which("setpriv") or not _unprivileged_userns_allowed(),
                    reason="needs setpriv and unprivileged user namespaces")
def test_runs_as_an_ordinary_user(msb):
    # Copy the binaries somewhere an ordinary user can execute them from.
    top = tempfile.mkdtemp(prefix="/tmp/msb-unpriv-")
    try:
        os.chmod(top, 0o755)
        build = os.path.dirname(os.path.dirname(msb.path))
        for sub, name in (("cli", "msb"), ("shim", "msb-shim"), ("agent", "msb-agent")):
            os.makedirs(os.path.join(top, sub))
            shutil.copy2(os.path.join(build, sub, name), os.path.join(top, sub, name))
            os.chmod(os.path.join(top, sub), 0o755)
        # No libmsb.so beside it: msb links libmsb's archive (issue 17).
        xdg = os.path.join(top, "xdg")
        os.makedirs(xdg)
        os.chown(xdg, 65534, 65534)
        os.chmod(xdg, 0o700)
        p = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "-i",
             "PATH=/usr/bin:/bin", f"XDG_RUNTIME_DIR={xdg}",
             os.path.join(top, "cli", "msb"), "run", "--min-isolation", "container", "--",
             "sh", "-c", "id -u; cat /proc/self/uid_map; echo x > /tmp/f && cat /tmp/f"],
            capture_output=True, timeout=60)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.decode().split()
        assert lines[0] == "0"               # root inside ...
        assert lines[1:4] == ["0", "65534", "1"]  # ... is the caller outside, one id
        assert lines[4] == "x"
        # State lived in $XDG_RUNTIME_DIR/msb: the run's sandbox is gone, the
        # warm pool's are there (docs/pool.md), and a drain leaves nothing.
        ns_dir = os.path.join(xdg, "msb", "ns")
        assert sandbox_dirs(ns_dir) == [] and os.listdir(os.path.join(ns_dir, "pool"))
        d = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "-i",
             "PATH=/usr/bin:/bin", f"XDG_RUNTIME_DIR={xdg}",
             os.path.join(top, "cli", "msb"), "pool", "drain"],
            capture_output=True, timeout=60)
        assert d.returncode == 0 and b"2 pooled sandboxes removed" in d.stdout, d
        assert os.listdir(ns_dir) == []
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_killing_the_host_mid_acquire_leaves_nothing_purge_cannot_remove(msb, state):
    # Kill `msb acquire` at points spread over its whole run; whatever it
    # left (a half-made directory, a shim still starting, a live sandbox)
    # must be removable by purge.
    for delay_ms in (0, 1, 2, 4, 6, 8, 12, 16, 25, 40):
        p = subprocess.Popen([msb.path, "acquire", "--state-dir", state, *FLOOR,
                              "--thread", f"k{delay_ms}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay_ms / 1000)
        p.kill()
        p.wait()
    time.sleep(0.5)  # let any shim that was already started finish starting
    for delay_ms in (0, 1, 2, 4, 6, 8, 12, 16, 25, 40):
        r = msb("purge", "--state-dir", state, "--scope", "cli", "--thread", f"k{delay_ms}")
        assert r.returncode == 0, r.stderr
