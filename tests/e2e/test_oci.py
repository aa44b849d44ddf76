"""The `oci` backend against the real runtimes: runsc (gVisor) and crun (issue 20).

Every sandbox test runs once per runtime. The state root of each test is a
fresh directory under /tmp that others may traverse (the runtimes reach the
sandbox's root as its mapped root), and each test ends with a leak check: no
sandbox directory, no process naming the root, no cgroup of the root's.
"""
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import BUILD, ROOT
from test_serve import ADD_SCHEMA, PURE, Serve, answer, b64, unb64
from test_vm_egress import BODY, GUEST as EGRESS_GUEST, http_host  # noqa: F401 (fixture)

MSB = os.path.join(BUILD, "cli", "msb")
AGENT = os.path.join(BUILD, "agent", "msb-agent")
RUNTIMES = ["runsc", "crun"]
KEY = {"scope": "app", "thread_id": "t1", "agent_dir": "agent"}
SPEC = {"kind": "shell"}


def have(rt):
    return os.geteuid() == 0 and shutil.which(rt) is not None


def runtimes():
    return [pytest.param(rt, marks=pytest.mark.skipif(not have(rt), reason=f"root and {rt}"))
            for rt in RUNTIMES]


# ---- leaks -----------------------------------------------------------------------------------

def _cgroup_leaves(state):
    """msb cgroup leaves of this state root: msb-<name>-<digest>, the digest the first 8 hex
    of SHA-256 of <root>/oci/msb-<name> (the shim's naming)."""
    found = []
    for ctrl in os.listdir("/sys/fs/cgroup"):
        top = os.path.join("/sys/fs/cgroup", ctrl)
        if os.path.islink(top) or not os.path.isdir(top):
            continue
        for root, dirs, _ in os.walk(top):
            for d in dirs:
                parts = d.split("-")
                if len(parts) == 3 and parts[0] == "msb":
                    path = f"{state}/oci/msb-{parts[1]}"
                    if hashlib.sha256(path.encode()).hexdigest()[:8] == parts[2]:
                        found.append(os.path.join(root, d))
            if root.count("/") > top.count("/") + 4:
                dirs[:] = []
    return found


def _processes(state):
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state in cmd:
            out.append((int(pid), cmd))
    return out


def leaks(state):
    left = []
    oci = os.path.join(state, "oci")
    if os.path.isdir(oci) and os.listdir(oci):
        left.append(("state", os.listdir(oci)))
    left += [("process", p) for p in _processes(state)]
    left += [("cgroup", c) for c in _cgroup_leaves(state)]
    return left


def wait_no_leaks(state, timeout=10):
    deadline = time.monotonic() + timeout
    while leaks(state) and time.monotonic() < deadline:
        time.sleep(0.1)
    return leaks(state)


@pytest.fixture
def state():
    d = tempfile.mkdtemp(prefix="msb-oci-e2e-", dir="/tmp")
    os.chmod(d, 0o711)
    yield d
    left = wait_no_leaks(d)
    subprocess.run([MSB, "purge", "--config", _write(d, {"type": "oci", "state_dir": d}),
                    "--scope", "app", "--thread", "t1"], capture_output=True)
    shutil.rmtree(d, ignore_errors=True)
    assert not left, left


def _write(state, obj, name="backend.json"):
    path = os.path.join(state, name)
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


def backend(state, rt, **kw):
    # No warm pool unless a test asks for one: these look at the sandbox made for the key.
    return {"type": "oci", "runtime": rt, "state_dir": state, "pool_size": 0, **kw}


def router(state, rt, floor="container", **kw):
    return {"min_isolation": floor, "backends": [backend(state, rt, **kw)]}


@pytest.fixture
def sandbox(state, request):
    """msb serve with an oci router and one acquired sandbox (runtime: the param)."""
    s = Serve()
    s.state = state
    s.rt = request.param
    s.router = s.call("router.new", config=router(state, request.param))["router"]
    s.sandbox = s.call("router.acquire", router=s.router, key=KEY, spec=SPEC)["sandbox"]
    yield s
    s.call("router.dispose", router=s.router, key=KEY)
    assert s.close() == 0


def sandbox_dir(state):
    names = os.listdir(os.path.join(state, "oci"))
    assert len(names) == 1, names
    return os.path.join(state, "oci", names[0])


# ---- the agent's --stdio hook ------------------------------------------------------------------

def frame(t, ch, payload):
    return struct.pack("<IHHI", len(payload), t, 0, ch) + payload


def read_frame(sock):
    def n(k):
        b = b""
        while len(b) < k:
            d = sock.recv(k - len(b))
            assert d, "connection closed"
            b += d
        return b
    length, t, _, ch = struct.unpack("<IHHI", n(12))
    return t, ch, n(length)


HELLO = frame(1, 0, struct.pack("<IHHIIB3x", 0x3142534D, 1, 1, 65536, 64, 1))


def exec_open(ch, argv):
    s = lambda x: struct.pack("<I", len(x)) + x
    pl = struct.pack("<IIQQ", 0, 1 << 20, 10000, 0) + s(b"") + struct.pack("<II", len(argv), 0)
    return frame(16, ch, pl + b"".join(s(a) for a in argv))


def test_agent_stdio_serves_its_stdin_and_ends_with_it(tmp_path):
    """msb-agent --stdio: stdin is the one connection; its end ends the agent (and what runs)."""
    work = tmp_path / "work"
    work.mkdir()
    host, guest = socket.socketpair()
    p = subprocess.Popen([AGENT, "--stdio", "--work", str(work)], stdin=guest,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    guest.close()
    host.sendall(HELLO)
    assert read_frame(host)[0] == 1
    host.sendall(exec_open(1, [b"printf", b"a\\000b"]))
    out, code = b"", None
    while code is None:
        t, ch, pl = read_frame(host)
        if t == 17:
            out += pl[1:]
        elif t == 20:
            code = struct.unpack("<BBHi", pl)[3]
    assert (out, code) == (b"a\0b", 0)
    host.sendall(exec_open(3, [b"sleep", b"30"]))
    time.sleep(0.2)
    host.close()
    assert p.wait(timeout=5) == 0
    # Without --stdio the agent wants its listening socket, and stdin must be a socket.
    q = subprocess.run([AGENT, "--stdio"], stdin=subprocess.DEVNULL, capture_output=True)
    assert q.returncode == 2 and b"stream socket" in q.stderr


# ---- the type, the doctor, the rung --------------------------------------------------------------

@pytest.mark.skipif(not have("runsc") or not have("crun"), reason="root, runsc and crun")
def test_doctor_tries_each_runtime_and_every_gvisor_platform():
    p = subprocess.run([MSB, "doctor", "--json"], capture_output=True, timeout=120)
    doc = json.loads(p.stdout)
    probes = {pr["name"]: pr for pr in doc["probes"]}
    assert probes["oci.runsc"]["ok"] and "version" in probes["oci.runsc"]["reason"]
    assert probes["oci.runsc.ptrace"]["ok"], probes["oci.runsc.ptrace"]
    for name in ("oci.runsc.kvm", "oci.runsc.systrap", "oci.runsc.statx", "oci.crun",
                 "oci.runc"):
        assert name in probes and probes[name]["reason"], name
    assert probes["oci.crun"]["ok"], probes["oci.crun"]
    oci = next(b for b in doc["backends"] if b["name"] == "oci")
    assert oci["ok"] and "hardened_container" in oci["reason"] and "crun" in oci["reason"]


@pytest.mark.skipif(not have("crun"), reason="root and crun")
def test_backend_and_runtime_flags_choose_the_oci_backend(state):
    """`msb run --backend oci --runtime crun` (no JSON): the sandbox runs under crun, and
    --runtime on another backend type is refused with the reason."""
    base = [MSB, "run", "--backend", "oci", "--runtime", "crun", "--state-dir", state,
            "--min-isolation", "container"]
    p = subprocess.run(base + ["--", "sh", "-c", "echo $((6*7))"], capture_output=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout == b"42\n", p.stderr
    p = subprocess.run([MSB, "pool", "ls", "--runtime", "crun", "--state-dir", state, "--json"],
                       capture_output=True)
    assert p.returncode == 0 and len(json.loads(p.stdout)) == 2, p.stdout  # msb run's pool
    p = subprocess.run([MSB, "run", "--runtime", "crun", "--state-dir", state, "--", "true"],
                       capture_output=True, timeout=60)
    assert p.returncode == 2 and b"--runtime is the `oci` backend's" in p.stderr, p.stderr
    p = subprocess.run([MSB, "pool", "drain", "--runtime", "crun", "--state-dir", state],
                       capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stdout == b"2 pooled sandboxes removed\n", p.stderr
    # An allowlist sandbox is never pooled on oci (docs/pool.md): a fill of one is refused.
    p = subprocess.run([MSB, "pool", "fill", "--runtime", "crun", "--state-dir", state,
                        "--allow", "x.test", "--size", "1"], capture_output=True, timeout=60)
    assert p.returncode == 2 and b"never pooled" in p.stderr, p.stderr


@pytest.mark.skipif(not have("runsc") or not have("crun"), reason="root, runsc and crun")
def test_the_rung_is_the_runtimes_and_config_cannot_raise_it(state):
    runsc = _write(state, backend(state, "runsc"), "runsc.json")
    crun = _write(state, backend(state, "crun"), "crun.json")
    hard = ["--min-isolation", "hardened_container"]
    p = subprocess.run([MSB, "run", "--config", runsc, *hard, "--", "true"], capture_output=True)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([MSB, "run", "--config", crun, *hard, "--", "true"], capture_output=True)
    assert p.returncode != 0 and b"SandboxBackendNotPermitted" in p.stderr, p.stderr
    p = subprocess.run([MSB, "run", "--config", crun, "--min-isolation", "container", "--",
                        "true"], capture_output=True)
    assert p.returncode == 0, p.stderr
    for bad in ({"isolation": "microvm"}, {"declarations": {}}):
        p = subprocess.run([MSB, "run", "--config", _write(state, {**backend(state, "crun"),
                                                                   **bad}, "bad.json"),
                            "--min-isolation", "container", "--", "true"], capture_output=True)
        assert p.returncode != 0 and b"unknown key" in p.stderr, p.stderr
    p = subprocess.run([MSB, "run", "--config", _write(state, backend(state, "crun",
                                                                       platform="kvm"), "b.json"),
                        "--min-isolation", "container", "--", "true"], capture_output=True)
    assert p.returncode != 0 and b"platform" in p.stderr, p.stderr
    # runc is refused until it can keep the agent's socket and the sandbox's cgroup.
    p = subprocess.run([MSB, "run", "--config", _write(state, backend(state, "runc"), "r.json"),
                        "--min-isolation", "container", "--", "true"], capture_output=True)
    assert p.returncode != 0 and b"NotImplementedError" in p.stderr, p.stderr


# ---- exec ------------------------------------------------------------------------------------

@pytest.mark.parametrize("sandbox", runtimes(), indirect=True)
def test_exec_bytes_and_exit_codes_are_exact(sandbox):
    s = sandbox
    r = s.call("sandbox.exec", sandbox=s.sandbox, argv=["printf", "\\000\\377a b\\n"])
    assert unb64(r["stdout"]) == b"\0\xffa b\n" and r["exit_code"] == 0
    r = s.call("sandbox.exec", sandbox=s.sandbox, shell="echo out; echo err >&2; exit 201")
    assert (unb64(r["stdout"]), unb64(r["stderr"]), r["exit_code"]) == (b"out\n", b"err\n", 201)
    r = s.call("sandbox.exec", sandbox=s.sandbox, shell="kill -9 $$")
    assert (r["exit_code"], r["term_signal"]) == (137, 9)
    r = s.call("sandbox.exec", sandbox=s.sandbox, argv=["no-such-program"])
    assert r["exit_code"] == 127
    big = s.call("sandbox.exec", sandbox=s.sandbox, shell="head -c 3000000 /dev/zero")
    assert len(unb64(big["stdout"])) == 3000000
    r = s.call("sandbox.exec", sandbox=s.sandbox, argv=["cat"], stdin=b64(b"in\0put"))
    assert unb64(r["stdout"]) == b"in\0put"
    # Workloads have no capability; the agent is not theirs to signal.
    r = s.call("sandbox.exec", sandbox=s.sandbox,
               shell="grep -E '^(CapEff|CapBnd)' /proc/self/status; kill -TERM 1")
    out = unb64(r["stdout"]).decode()
    assert "CapEff:\t0000000000000000" in out and "CapBnd:\t0000000000000000" in out, out
    assert r["exit_code"] != 0
    assert s.call("sandbox.exec", sandbox=s.sandbox, argv=["true"])["exit_code"] == 0
    # /dev is read-only, its nodes are not (gVisor refused `> /dev/null` with EROFS).
    r = s.call("sandbox.exec", sandbox=s.sandbox,
               shell="echo x > /dev/null && echo x >> /dev/null && head -c 3 /dev/zero | wc -c"
                     " && head -c 3 /dev/urandom > /dev/null && echo ok; echo y > /dev/new")
    assert unb64(r["stdout"]) == b"3\nok\n" and r["exit_code"] != 0, r


@pytest.mark.parametrize("sandbox", runtimes(), indirect=True)
def test_a_timeout_kills_the_command_and_what_it_started(sandbox):
    s = sandbox
    t = time.monotonic()
    e = s.error("sandbox.exec", {"sandbox": s.sandbox, "timeout": 1,
                                 "shell": "sleep 60 & sleep 61 & echo started; wait"})
    assert e["data"]["name"] == "TimeoutError", e
    assert time.monotonic() - t < 8
    r = s.call("sandbox.exec", sandbox=s.sandbox, shell="ps -eo comm | grep -c sleep")
    assert unb64(r["stdout"]).strip() == b"0", r


@pytest.mark.parametrize("sandbox", runtimes(), indirect=True)
def test_the_network_is_loopback_only(sandbox):
    s = sandbox
    r = s.call("sandbox.exec", sandbox=s.sandbox, shell="cat /proc/net/dev | tail -n +3")
    ifaces = [line.split(":")[0].strip() for line in unb64(r["stdout"]).decode().splitlines()]
    assert ifaces == ["lo"], ifaces


@pytest.mark.parametrize("sandbox", runtimes(), indirect=True)
def test_the_host_images_etc_entries_are_binds_or_under_runsc_copies(sandbox):
    """Under gVisor each bind mount is a gofer mount, ~7 ms of the start apiece (issue 20):
    runsc gets copies of the host's /etc entries in the root's skeleton, owned by the guest's
    root, the same bytes; crun keeps read-only binds."""
    s = sandbox
    probe = ("import hashlib, os\n"
             "mounts = [l.split()[1] for l in open('/proc/mounts')]\n"
             "st = os.stat('/etc/ld.so.cache')\n"
             "print('/etc/ld.so.cache' in mounts, st.st_uid, st.st_gid,\n"
             "      hashlib.sha256(open('/etc/ld.so.cache', 'rb').read()).hexdigest())\n"
             "print(len(os.listdir('/etc/alternatives')))\n")
    r = s.call("sandbox.exec", sandbox=s.sandbox, argv=["python3", "-c", probe])
    assert r["exit_code"] == 0, unb64(r["stderr"])
    first, second = unb64(r["stdout"]).decode().splitlines()
    mounted, uid, gid, digest = first.split()
    with open("/etc/ld.so.cache", "rb") as f:
        assert digest == hashlib.sha256(f.read()).hexdigest()
    assert int(second) == len(os.listdir("/etc/alternatives"))
    # A copy is the guest root's; a bind shows the host's root, unmapped (nobody).
    assert (uid, gid) == (("0", "0") if s.rt == "runsc" else ("65534", "65534")), first
    assert mounted == ("False" if s.rt == "runsc" else "True"), first


# ---- files ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("sandbox", runtimes(), indirect=True)
def test_files_in_and_out_with_caps_and_link_refusals(sandbox):
    s = sandbox
    blob = bytes(range(256)) * 400
    s.call("sandbox.write_file", sandbox=s.sandbox, path="d/in.bin", data=b64(blob))
    r = s.call("sandbox.exec", sandbox=s.sandbox, shell="sha256sum d/in.bin; echo hi > out.txt")
    assert unb64(r["stdout"]).split()[0].decode() == hashlib.sha256(blob).hexdigest()
    got = s.call("sandbox.read_file", sandbox=s.sandbox, path="out.txt")
    assert unb64(got["data"]) == b"hi\n"
    e = s.error("sandbox.read_file", {"sandbox": s.sandbox, "path": "d/in.bin",
                                      "max_bytes": 1000})
    assert e["data"]["name"] == "SandboxTransferCapExceeded", e
    # Links the guest plants: never followed, never written through.
    s.call("sandbox.exec", sandbox=s.sandbox, shell="ln -s /etc/passwd pw; ln -s /etc up")
    e = s.error("sandbox.read_file", {"sandbox": s.sandbox, "path": "pw"})
    assert e["data"]["name"] in ("OSError", "ValueError"), e
    e = s.error("sandbox.write_file", {"sandbox": s.sandbox, "path": "up/x", "data": b64(b"x")})
    assert e["data"]["name"] == "ValueError", e
    e = s.error("sandbox.write_file", {"sandbox": s.sandbox, "path": "../x", "data": b64(b"x")})
    assert e["data"]["name"] == "ValueError", e
    names = [x["path"] for x in s.call("sandbox.list", sandbox=s.sandbox)["entries"]]
    assert names == ["d", "out.txt", "pw", "up"], names
    s.call("sandbox.remove", sandbox=s.sandbox, path="d", recursive=True)
    r = s.call("sandbox.exec", sandbox=s.sandbox, shell="test -e d; echo $?")
    assert unb64(r["stdout"]) == b"1\n"


@pytest.mark.parametrize("sandbox", runtimes(), indirect=True)
def test_reset_is_the_state_of_creation(sandbox):
    s = sandbox
    s.call("sandbox.exec", sandbox=s.sandbox,
           shell="echo x > /root/r; echo y > w; echo z > /dev/shm/s; "
           "sleep 60 >/dev/null 2>&1 & true")
    s.call("sandbox.reset", sandbox=s.sandbox, timeout=60)
    r = s.call("sandbox.exec", sandbox=s.sandbox,
               shell="ls /root; ls; ls /dev/shm; ps -eo comm | grep -c sleep")
    assert unb64(r["stdout"]) == b"0\n", r


@pytest.mark.parametrize("sandbox", runtimes(), indirect=True)
def test_limits_and_their_outcomes(sandbox):
    """The writable layer is size-capped (ENOSPC, no_space); the agent survives."""
    s = sandbox
    r = s.call("sandbox.exec", sandbox=s.sandbox,
               shell="head -c 400000000 /dev/zero > /var/tmp/fill; echo $?")
    assert unb64(r["stdout"]) != b"0\n" and r["no_space"], r
    s.call("sandbox.exec", sandbox=s.sandbox, shell="rm -f /var/tmp/fill")
    r = s.call("sandbox.exec", sandbox=s.sandbox, argv=["true"])
    assert r["exit_code"] == 0 and not r["no_space"], r


# ---- disposal, and sandboxes killed from outside ----------------------------------------------

def _pids(state, *needles):
    return [pid for pid, cmd in _processes(state) if all(n in cmd for n in needles)]


VICTIMS = [("runsc", "sentry"), ("runsc", "gofer"), ("runsc", "shim"), ("crun", "init"),
           ("crun", "shim")]


@pytest.mark.parametrize("rt,victim", [pytest.param(*v, marks=pytest.mark.skipif(
    not have(v[0]), reason=f"root and {v[0]}")) for v in VICTIMS])
def test_a_sandbox_killed_from_outside_gives_typed_errors_and_purge_cleans(state, rt, victim):
    s = Serve()
    r = s.call("router.new", config=router(state, rt))["router"]
    sb = s.call("router.acquire", router=r, key=KEY, spec=SPEC)["sandbox"]
    assert s.call("sandbox.exec", sandbox=sb, argv=["true"])["exit_code"] == 0
    d = sandbox_dir(state)
    if victim == "sentry":
        pids = _pids(state, "runsc-sandbox", "boot")
    elif victim == "gofer":
        pids = _pids(state, "runsc-gofer", "gofer")
    elif victim == "shim":
        pids = [int(open(os.path.join(d, "shim.pid")).read().split()[0])]
    else:
        pids = [int(open(os.path.join(d, "init.pid")).read().split()[0])]
    assert len(pids) == 1, (victim, _processes(state))
    os.kill(pids[0], signal.SIGKILL)
    time.sleep(0.5)
    e = s.error("sandbox.exec", {"sandbox": sb, "argv": ["true"], "timeout": 10})
    assert e["data"]["name"] in ("RuntimeError", "ProtocolError"), e
    assert s.close() == 0
    p = subprocess.run([MSB, "purge", "--config", _write(state, backend(state, rt)), "--scope",
                        "app", "--thread", "t1"], capture_output=True, timeout=60)
    assert p.returncode == 0 and b"disposed 1" in p.stdout, (p.stdout, p.stderr)
    assert wait_no_leaks(state) == []


@pytest.mark.parametrize("rt", runtimes())
def test_a_workload_that_stops_every_new_process_does_not_stall_the_agent(state, rt):
    """An exec's child may share the agent's memory until its execve only while no workload
    exists to stop it (agent/exec.c): stopped there, it would stop the agent with it, and no
    bound would hold (9.4). Here a workload stops every other process while a second exec
    starts; the agent must still end both at their bounds, and the sandbox lives on. A stalled
    agent cannot: the host then discards the sandbox (9.5) and the marker is gone."""
    cfg = _write(state, backend(state, rt))
    common = ["--config", cfg, "--min-isolation", "container", "--scope", "app",
              "--thread", "t1"]

    def run(*argv, timeout="60"):
        return subprocess.run([MSB, "exec", *common, "--no-stdin", "--timeout", timeout, "--",
                               *argv], capture_output=True, timeout=120)

    assert run("sh", "-c", "echo here > /tmp/marker").returncode == 0
    b = subprocess.Popen([MSB, "exec", *common, "--no-stdin", "--timeout", "3", "--", "sh",
                          "-c", "while :; do kill -STOP -1; done"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1)  # not a bound: the stopping has begun (the CLI shows no output early)
        c = run("echo", "c", timeout="1")
        out_b, err_b = b.communicate(timeout=120)
    finally:
        if b.poll() is None:
            b.kill()
            b.wait()
    # the stopped one was killed at its bound, or ran before it was stopped
    assert c.returncode == 0 and c.stdout == b"c\n" or b"TimeoutError" in c.stderr, c
    assert b"TimeoutError" in err_b, err_b
    r = run("cat", "/tmp/marker")
    assert (r.returncode, r.stdout) == (0, b"here\n"), r
    assert subprocess.run([MSB, "dispose", "--config", cfg, "--scope", "app", "--thread", "t1"],
                          capture_output=True, timeout=60).returncode == 0


# ---- the relay ---------------------------------------------------------------------------------

@pytest.mark.skipif(not have("crun"), reason="root and crun")
def test_the_relay_serves_many_hosts_and_drops_a_hostile_one_alone(state):
    cfg = _write(state, backend(state, "crun"))
    base = [MSB, "exec", "--config", cfg, "--min-isolation", "container", "--scope", "app",
            "--thread", "t1", "--agent", "agent"]
    assert subprocess.run(base + ["--", "true"], capture_output=True).returncode == 0
    sock = os.path.join(sandbox_dir(state), "agent.sock")
    # A host that breaks the protocol mid-way gets an ERROR and is closed ...
    bad = socket.socket(socket.AF_UNIX)
    bad.connect(sock)
    bad.sendall(HELLO)
    assert read_frame(bad)[0] == 1
    bad.sendall(frame(21, 7, b"\x00"))  # CANCEL on a channel never opened
    t, ch, pl = read_frame(bad)
    assert (t, ch) == (2, 0) and b"never opened" in pl
    # ... while many others run at once, each with its own output and status.
    results = {}

    def one(i):
        p = subprocess.run(base + ["--", "sh", "-c", f"sleep 0.3; echo {i}; exit {i}"],
                           capture_output=True)
        results[i] = (p.returncode, p.stdout)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(1, 9)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == {i: (i, f"{i}\n".encode()) for i in range(1, 9)}, results
    p = subprocess.run([MSB, "dispose", "--config", cfg, "--scope", "app", "--thread", "t1",
                        "--agent", "agent"], capture_output=True)
    assert p.returncode == 0, p.stderr


# ---- the suites ----------------------------------------------------------------------------------

@pytest.mark.parametrize("rt", runtimes())
def test_every_declared_conformance_suite_passes(state, rt):
    p = subprocess.run([MSB, "conformance", "oci", "--config", _write(state, backend(state, rt)),
                        "--json"], capture_output=True, timeout=300)
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and doc["failed"] == 0, p.stdout
    ran = {s["suite"] for s in doc["suites"] if s["ran"]}
    assert {"EXEC", "FILES_IN", "FILES_OUT", "FILES_DELETE", "RECLAIM", "CALL_SCOPE"} <= ran


@pytest.mark.parametrize("rt", runtimes())
def test_the_escape_suite_blocks_every_attempt(state, rt):
    """Twice, with a warm pool of one: the first run's sandboxes are made for it (and the pool
    filled behind them), the second's are claimed from the pool - a claimed sandbox is held to
    the same outcomes (under runsc its agent dropped CAP_SYS_ADMIN when it was named)."""
    cfg = _write(state, backend(state, rt, pool_size=1))
    for run in ("made", "claimed"):
        before = {e["name"] for e in pool_entries(cfg)}
        p = subprocess.run([MSB, "conformance", "--escape", "--config", cfg, "--json"],
                           capture_output=True, timeout=300)
        doc = json.loads(p.stdout)
        bad = {r["probe"]: r for r in doc["probes"] if not r["ok"]}
        assert bad == {} and p.returncode == 0, (run, bad, p.stderr)
        assert len(before) == (0 if run == "made" else 2), before
        if run == "claimed":
            assert not before & {e["name"] for e in pool_entries(cfg)}, "nothing was claimed"
        wait_pool_ready(cfg, 2)
    assert subprocess.run([MSB, "pool", "drain", "--config", cfg]).returncode == 0
    rows = {r["probe"]: r for r in doc["probes"]}
    # Under gVisor the agent shares its workloads' pid namespace (--no-nest)
    # and covers its own /proc/1 with an empty tmpfs of mode 0 that no
    # workload owns (agent/pidns.c): PID 1's entries are refused, not absent.
    if rt == "runsc":
        for probe in ("pid1-oom-score-adj", "pid1-environ", "pid1-maps", "proc-pid1-mem",
                      "setns-pid1"):
            assert "EACCES" in rows[probe]["detail"], rows[probe]
    assert "uid 1000000000" in rows["host:guest-root-unprivileged"]["detail"]
    # gVisor answers two probes with its own kernel's view; accepted only as stated.
    differs = {n for n, r in rows.items() if r["expected"] != "blocked" and
               r["expected"] != "contained"}
    assert differs == ({"uid-not-host-root", "host-device-nodes"} if rt == "runsc" else set())


@pytest.mark.parametrize("sandbox", runtimes(), indirect=True)
def test_the_fingerprint_sees_what_the_guest_left(sandbox):
    """crun: the ns fingerprint (layer, /dev/shm, storage base, processes, all on the host).
    runsc: the same paths walked on the host, with what gVisor keeps in its sentry - the
    processes, a bound socket, a fifo - asked of the agent (oci_fingerprint.c)."""
    s = sandbox
    before = s.call("sandbox.fingerprint", sandbox=s.sandbox)
    assert before["supported"] and before["changed_paths"] == [], before
    assert before["running_programs"] == [], before
    s.call("sandbox.exec", sandbox=s.sandbox,
           shell="echo a > /root/r; echo b > w.txt; echo c > /dev/shm/s; mkfifo /root/f; "
                 "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sk\")'; "
                 "sleep 60 <&- >&- 2>&- & true")
    after = s.call("sandbox.fingerprint", sandbox=s.sandbox)
    for p in ("/root/r", "/maf-sandbox/work/w.txt", "/dev/shm/s", "/root/f",
              "/maf-sandbox/work/sk"):
        assert p in after["changed_paths"], after
    assert any("sleep 60" in p for p in after["running_programs"]), after
    # /dev is read-only: nothing can hide there.
    r = s.call("sandbox.exec", sandbox=s.sandbox, shell="echo x > /dev/hidden")
    assert r["exit_code"] != 0
    # A directory the agent's walk cannot read is refused, not passed over.
    if s.rt == "runsc":
        s.call("sandbox.exec", sandbox=s.sandbox, shell="mkdir -p /root/d && chmod 0 /root/d")
        e = s.error("sandbox.fingerprint", {"sandbox": s.sandbox})
        assert "cannot attest" in e["message"] and "/root/d" in e["message"], e


@pytest.mark.skipif(not have("crun"), reason="root and crun")
def test_racing_acquires_of_one_key_get_one_sandbox_named_from_the_key(state):
    cfg = _write(state, backend(state, "crun"))
    args = [MSB, "acquire", "--config", cfg, "--min-isolation", "container", "--scope", "app",
            "--thread", "t1", "--agent", "agent"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(4)]
    ids = {p.communicate()[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs) and len(ids) == 1, ids
    names = os.listdir(os.path.join(state, "oci"))
    assert len(names) == 1 and names[0].startswith("msb-") and len(names[0]) == 36, names
    # Another process finds it by the key alone, and disposes it by its labels.
    again = subprocess.run(args, capture_output=True)
    assert again.stdout.strip() in ids
    p = subprocess.run([MSB, "dispose", "--config", cfg, "--scope", "app", "--thread", "t1",
                        "--agent", "agent"], capture_output=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("rt", runtimes())
@pytest.mark.skipif(not shutil.which("busybox"), reason="busybox (scripts/make-oci-image)")
def test_dir_and_oci_images_are_the_ns_ones(state, rt):
    layout = os.path.join(state, "layout")
    subprocess.run([os.path.join(ROOT, "scripts", "make-oci-image"), layout], check=True,
                   capture_output=True)
    root = os.path.join(state, "dirroot", "bin")
    os.makedirs(root)
    shutil.copy(shutil.which("busybox"), os.path.join(root, "busybox"))
    for c in ("sh", "cat", "ls"):
        os.symlink("busybox", os.path.join(root, c))
    for image, marker in ((f"dir:{os.path.dirname(root)}", "bin"), (f"oci:{layout}", "linuxrc")):
        cfg = _write(state, backend(state, rt, image=image), "img.json")
        p = subprocess.run([MSB, "run", "--config", cfg, "--min-isolation", "container", "--",
                            "/bin/sh", "-c", "echo w > /tmp/x && cat /tmp/x && ls /"],
                           capture_output=True, timeout=60)
        assert p.returncode == 0, (image, p.stderr)
        assert p.stdout.startswith(b"w\n") and marker.encode() in p.stdout.split(), p.stdout


# ---- egress: the allowlist (docs/oci.md "Egress") ----------------------------------------------

@pytest.mark.parametrize("rt", runtimes())
def test_allowlist_answers_refuses_and_reports_17_9(state, rt, http_host):  # noqa: F811
    """The agent's proxy port in the sandbox, its tunnels carried by the shim's relay to the
    egress proxy (a process of the shim's): an allowlisted host answers, another is refused
    (403 not-allowlisted), bulk bytes cross the tunnels' credit windows intact both ways, and
    every decision comes back as an EgressObserved event; nothing is left after."""
    eg = {"allow_cidrs": ["127.0.0.0/8"], "system_resolver": False,
          "hosts": {"allowed.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}}
    cfg = _write(state, backend(state, rt, egress=eg))
    events = os.path.join(state, "events.jsonl")
    urls = [["allowed", f"http://allowed.test:{http_host}/x"],
            ["unlisted", f"http://other.test:{http_host}/x"]]
    p = subprocess.run([MSB, "run", "--config", cfg, "--min-isolation", "container",
                        "--allow", "allowed.test", "--events", events, "--", "python3", "-c",
                        EGRESS_GUEST, json.dumps(urls)], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    out = json.loads(p.stdout)
    assert out["proxy"] == "http://127.0.0.1:3128", out
    assert out["allowed"] == [200, BODY.decode()], out
    assert out["unlisted"][0] == 403 and "not-allowlisted" in out["unlisted"][1], out
    assert out["down"] and out["up"], out
    with open(events) as f:
        evs = [json.loads(line) for line in f if line.strip()]
    evs = [e for e in evs if e["event"] == "EgressObserved"]
    allowed = [e for e in evs if e["host"] == "allowed.test"]
    assert len(allowed) == 3 and all(e["decision"] == "ALLOW" for e in allowed), evs
    assert max(e["bytes_down"] for e in allowed) > 3 * 1024 * 1024
    assert max(e["bytes_up"] for e in allowed) > 2 * 1024 * 1024
    denied = [e for e in evs if e["host"] == "other.test"]
    assert [(e["decision"], e["reason"]) for e in denied] == [("DENY", "not-allowlisted")]
    assert len(evs) == 4, evs
    assert wait_no_leaks(state) == []


@pytest.mark.parametrize("rt", runtimes())
def test_the_allowlist_proxy_is_started_again_by_a_reset(state, rt, http_host):  # noqa: F811
    eg = {"allow_cidrs": ["127.0.0.0/8"], "system_resolver": False,
          "hosts": {"allowed.test": ["127.0.0.1"]}}
    s = Serve()
    r = s.call("router.new", config=router(state, rt, egress=eg))["router"]
    spec = {"kind": "shell", "egress": "allowlist", "egress_allow": ["allowed.test"]}
    sb = s.call("router.acquire", router=r, key=KEY, spec=spec)["sandbox"]
    get = ["python3", "-c", "import urllib.request as u; print(u.urlopen("
           f"'http://allowed.test:{http_host}/x', timeout=30).status)"]
    for _ in range(2):
        out = s.call("sandbox.exec", sandbox=sb, argv=get)
        assert unb64(out["stdout"]) == b"200\n", out
        s.call("sandbox.reset", sandbox=sb, timeout=60)
    s.call("router.dispose", router=r, key=KEY)
    assert s.close() == 0


@pytest.mark.skipif(not have("crun"), reason="root and crun")
def test_a_closed_sandbox_has_no_proxy_and_no_route_out(state):
    r = subprocess.run([MSB, "run", "--config", _write(state, backend(state, "crun")),
                        "--min-isolation", "container", "--", "python3", "-c",
                        "import os, socket; print(os.environ.get('HTTP_PROXY'));"
                        "s = socket.socket(); s.settimeout(3)\n"
                        "try:\n s.connect(('127.0.0.1', 3128)); print('open')\n"
                        "except OSError as e:\n print('refused', e.errno)"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split()[:2] == ["None", "refused"], r.stdout


# ---- host tools over exec (docs/hosttools.md, transport 1) ---------------------------------------

@pytest.mark.parametrize("sandbox", runtimes(), indirect=True)
def test_the_guest_calls_a_host_tool_over_exec_14_1(sandbox):
    """The over-exec transport (exec, write, stat, read only) on oci: the guest's program calls
    a host tool the client answers; the library's gates refuse what does not bind."""
    s = sandbox
    g = s.call("host_tools.new", max_calls_per_run=8)["registry"]
    s.call("host_tools.register", registry=g, name="add", parameters=ADD_SCHEMA,
           declaration=PURE)
    seen = []

    def add(left, right):
        seen.append((left, right))
        return left + right
    answer(s, {"add": add})
    prog = ("import maf_host_tools as t\nprint('sum', t.call('add', left=2, right=3))\n"
            "try:\n    t.call('add', left='two', right=3)\n"
            "except t.HostToolError as e:\n    print('refused', e)\n")
    r = s.call("sandbox.run_with_host_tools", sandbox=s.sandbox, registry=g, transport="exec",
               program=prog, timeout=60, poll_interval=0.02)
    out = unb64(r["stdout"]).decode()
    assert r["exit_code"] == 0, out + unb64(r["stderr"]).decode()
    assert "sum 5" in out and "arguments do not bind to host tool 'add'" in out, out
    assert seen == [(2, 3)] and r["calls"] == 2 and r["delivered"] == 1, r
    assert s.call("host_tools.free", registry=g) == {}


# ---- the warm pool (docs/pool.md) ----------------------------------------------------------------

def pool_entries(cfg):
    p = subprocess.run([MSB, "pool", "ls", "--config", cfg, "--json"], capture_output=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def wait_pool_ready(cfg, n, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready = [e["name"] for e in pool_entries(cfg) if e["pool"]["state"] == "ready"]
        if len(ready) >= n:
            return ready
        time.sleep(0.05)
    raise AssertionError(f"no {n} ready in {seconds} s: {pool_entries(cfg)}")


def key_dir(state):
    names = [n for n in os.listdir(os.path.join(state, "oci")) if n.startswith("msb-")]
    assert len(names) == 1, names
    return names[0]


@pytest.mark.parametrize("rt", runtimes())
def test_a_pooled_sandbox_answers_under_its_keys_name_and_resets_so(state, rt):
    """A claim renames a ready sandbox onto the key's: it answers under the key's name (host
    name, /etc/hostname, /etc/hosts) with an empty writable layer and storage base, a reset
    makes it again under that name, the pool is filled again behind it, and a drain with the
    disposal leaves nothing (no process, cgroup or state: leaks())."""
    b = backend(state, rt, pool_size=1)
    cfg = _write(state, b)
    p = subprocess.run([MSB, "pool", "fill", "--config", cfg], capture_output=True, timeout=120)
    assert p.returncode == 0 and p.stdout == b"1 pooled sandbox started\n", p.stderr
    pooled = wait_pool_ready(cfg, 1)
    s = Serve()
    r = s.call("router.new", config={"min_isolation": "container", "backends": [b]})["router"]
    sb = s.call("router.acquire", router=r, key=KEY, spec=SPEC)["sandbox"]
    name = key_dir(state)
    assert name not in pooled
    look = ("hostname; cat /etc/hostname; grep -c \"localhost $(hostname)$\" /etc/hosts; "
            "find /root /maf-sandbox/work -mindepth 1 | wc -l")
    out = unb64(s.call("sandbox.exec", sandbox=sb, shell=look)["stdout"]).decode().split()
    assert out == [name, name, "1", "0"], out
    fp = s.call("sandbox.fingerprint", sandbox=sb)
    assert fp["changed_paths"] == [] and fp["running_programs"] == [], fp
    # msb ls lists it under the key, and what the pool holds (refilled behind the claim).
    again = wait_pool_ready(cfg, 1)
    p = subprocess.run([MSB, "ls", "--config", cfg, "--json"], capture_output=True)
    assert p.returncode == 0, p.stderr
    ls = {e["name"]: e for e in json.loads(p.stdout)}
    assert ls[name]["state"] == "running" and ls[name]["thread_id"] == "t1", ls
    assert ls[name]["image"] == "host" and ls[name]["backend"] == "oci", ls
    assert ls[again[0]]["state"] == "pooled" and len(ls) == 2, ls
    s.call("sandbox.exec", sandbox=sb, shell="echo x > /root/r; echo y > w")
    s.call("sandbox.reset", sandbox=sb, timeout=60)
    out = unb64(s.call("sandbox.exec", sandbox=sb, shell=look)["stdout"]).decode().split()
    assert out == [name, name, "1", "0"], out
    assert len(again) == 1 and again[0] not in pooled + [name], again
    s.call("router.dispose", router=r, key=KEY)
    assert s.close() == 0
    p = subprocess.run([MSB, "pool", "drain", "--config", cfg], capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stdout == b"1 pooled sandbox removed\n", p.stderr
    assert wait_no_leaks(state) == []


@pytest.mark.parametrize("rt", runtimes())
def test_a_pooled_sandbox_whose_shim_died_is_never_handed_out(state, rt):
    b = backend(state, rt, pool_size=1)
    cfg = _write(state, b)
    p = subprocess.run([MSB, "pool", "fill", "--config", cfg], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    dead = wait_pool_ready(cfg, 1)[0]
    tdir = os.path.join(state, "oci", "pool", os.listdir(os.path.join(state, "oci", "pool"))[0])
    with open(os.path.join(tdir, dead, "shim.pid")) as f:
        os.kill(int(f.read().split()[0]), signal.SIGKILL)
    time.sleep(0.3)
    p = subprocess.run([MSB, "run", "--config", cfg, "--min-isolation", "container", "--",
                        "hostname"], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().decode() not in (dead, ""), p.stdout
    assert dead not in [e["name"] for e in pool_entries(cfg)]
    p = subprocess.run([MSB, "purge", "--config", cfg, "--scope", "app", "--thread", "t1"],
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert wait_no_leaks(state) == []
