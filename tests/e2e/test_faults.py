"""The fault-injection suite (issue 15; docs/internals/faults.md).

Every named fault point (src/util/fault.c, msb__fault_points) is reached by
one operation of the `msb` CLI or of `msb serve`, run with MSB_FAULT_POINT
naming it: the process that reaches the point stops itself (SIGSTOP). The
suite then kills one process - the client, the shim, the agent or a workload
that runs at that moment - with SIGKILL (and the client with SIGTERM too),
lets the stopped process go on (SIGCONT) and checks:

  a. the client ends, within a bound, with exit 0 or a typed error (an exit
     status of the CLI's error classes and the error's name on stderr; a
     JSON-RPC error carrying the seed's name) - never a crash signal or a hang;
  b. `msb ls --json` says `running` only of a sandbox whose shim and agent
     are alive;
  c. the key recovers: `msb acquire` and `msb exec -- true` work, at most
     after one disposal, and a refusal before it is SandboxUnclean naming the
     death;
  d. `msb purge` leaves nothing behind (tests/e2e/leaks.py: no process,
     mount, cgroup or state directory).

Case ids read `<point>-<victim>-<KILL|TERM>`, e.g. `acquire.locked-shim-KILL`.
"""
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import BUILD, ROOT
from leaks import Snapshot, checked_state_root, drain_pool, unpooled

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the ns backend runs as root here")

MSB = os.path.join(BUILD, "cli", "msb")
FLOOR = ["--min-isolation", "container"]
STOP_WAIT = 20  # s: a point not reached by then fails the case
END_WAIT = 45   # s: the client must end by then (the shim's start bound is 30 s)
WRITE_BYTES = 2 << 20


# ---- the list of points: src/util/fault.c is its one source ------------------------------------

def _source(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def listed_points():
    body = _source("src/util/fault.c").split("msb__fault_points[] = {", 1)[1].split("NULL", 1)[0]
    return re.findall(r'"([a-z_.]+)"', body)


def placed_points():
    """Every msb__fault_point("...") call in the code, with where it is."""
    found = {}
    for top in ("src", "shim", "cli", "agent"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith(".c") or name == "fault.c":
                    continue
                path = os.path.join(d, name)
                with open(path) as f:
                    for point in re.findall(r'msb__fault_point\("([^"]+)"\)', f.read()):
                        found.setdefault(point, []).append(os.path.relpath(path, ROOT))
    return found


def error_names():
    """The seed's error names and the CLI's exit status for each (src/util/error.c)."""
    return {name: int(status) for name, status in re.findall(
        r'\{MSB_E_\w+, "(\w+)", [^,]+, (\d+)\}', _source("src/util/error.c"))}


NAMES = error_names()

# ---- the cases ---------------------------------------------------------------------------------
#
# point: (operation, who stops there, the victims that exist at that moment).
# Operations: `acquire` (cold: a fresh key), `acquire-warm` (the key's sandbox
# runs), `exec` (a warm sandbox, a workload that prints and sleeps), `write`,
# `read`, `reset` (through `msb serve`), `outputs` (`msb run --output --sink`),
# `dispose` (a warm sandbox).

POINTS = {
    "acquire.locked": ("acquire-warm", "client", ("client", "shim", "agent")),
    "acquire.labels_written": ("acquire", "client", ("client",)),
    "acquire.shim_started": ("acquire", "client", ("client", "shim", "agent")),
    "acquire.ready": ("acquire", "client", ("client", "shim", "agent")),
    "shim.spawned": ("acquire", "shim", ("client", "shim", "agent")),
    "exec.sent": ("exec", "client", ("client", "shim", "agent", "workload")),
    "exec.output": ("exec", "client", ("client", "shim", "agent", "workload")),
    "write_file.partial": ("write", "client", ("client", "shim", "agent")),
    "read_file.partial": ("read", "client", ("client", "shim", "agent")),
    "outputs.read": ("outputs", "client", ("client", "shim", "agent")),
    "reset.begin": ("reset", "client", ("client", "shim", "agent")),
    "dispose.locked": ("dispose", "client", ("client", "shim", "agent")),
    "dispose.shim_stopped": ("dispose", "client", ("client",)),
}


def cases():
    out = []
    for point, (_, _, victims) in POINTS.items():
        for victim in victims:
            out.append(pytest.param(point, victim, signal.SIGKILL,
                                    id=f"{point}-{victim}-KILL"))
            if victim == "client":
                out.append(pytest.param(point, victim, signal.SIGTERM,
                                        id=f"{point}-{victim}-TERM"))
    return out


CASES = cases()


def test_every_listed_point_is_placed_and_driven():
    """A point cannot rot silently: each listed name is called somewhere, each
    call names a listed point, and the suite drives each (its case then fails
    when the operation no longer reaches it)."""
    listed = listed_points()
    placed = placed_points()
    assert len(listed) == len(set(listed)), listed
    assert sorted(placed) == sorted(listed), (placed, listed)
    assert sorted(POINTS) == sorted(listed)
    # The shim's points are in the shim; the rest in the library.
    assert placed["shim.spawned"] == ["shim/msb-shim.c"]


# ---- processes ---------------------------------------------------------------------------------

PF_EXITING = 0x4


def _stat(pid):
    """(state, ppid) of pid, or None when it is gone; a process that has
    begun to exit shows as 'X', as the backend sees it (boundary/state.c)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        state = fields[0]
        if int(fields[6]) & PF_EXITING and state != "Z":
            state = "X"
        return state, int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid):
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _procs():
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        yield int(pid), [a.decode(errors="replace") for a in argv if a]


def in_pool(argv, root):
    """A shim of the warm pool `msb run` and `msb serve` keep (docs/pool.md),
    still pooled: its state directory is under <root>/ns/pool/ and there (a
    claimed one's was renamed onto its key's)."""
    return any(a.startswith(f"{root}/ns/pool/") and os.path.isdir(a) for a in argv)


def shims(root):
    """The shims of this state root's sandboxes, not the pool's (not a child
    of one between its fork and the agent's exec, which still carries the
    shim's command line)."""
    found = [pid for pid, argv in _procs()
             if argv and os.path.basename(argv[0]) == "msb-shim" and
             any(a.startswith(f"{root}/ns/") for a in argv) and not in_pool(argv, root) and
             alive(pid)]
    return [pid for pid in found if (_stat(pid) or ("", 0))[1] not in found]


def agents(root):
    sh = set(shims(root))
    return [pid for pid, argv in _procs()
            if argv and argv[0] == "msb-agent" and alive(pid) and (_stat(pid) or ("", 0))[1] in sh]


def workloads(token):
    return [pid for pid, argv in _procs() if argv == ["sleep", token] and alive(pid)]


def wait_for(what, fn, timeout):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.005)


def wait_stopped(pid_fn, proc_exited, what):
    """The pid (from pid_fn) once it is stopped at its point."""
    def stopped():
        gone = proc_exited()
        assert gone is None, f"{what} ended before reaching its point: {gone}"
        for pid in pid_fn():
            st = _stat(pid)
            if st and st[0] == "T":
                return pid
        return None
    return wait_for(f"{what} stopped at its point", stopped, STOP_WAIT)


def msb(*args, env=None, timeout=60):
    return subprocess.run([MSB, *args], capture_output=True, timeout=timeout, env=env)


def typed(rc, stderr):
    """An exit status of the CLI's error classes with the error's name."""
    m = re.search(r"^msb: ([A-Za-z]+): ", stderr, re.M)
    return m is not None and m.group(1) in NAMES and NAMES[m.group(1)] == rc


# ---- msb serve, as a bare JSON-RPC client ------------------------------------------------------

class Serve:
    def __init__(self, env):
        self.p = subprocess.Popen([MSB, "serve", "--no-events"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.cond = threading.Condition()
        self.msgs = {}
        self.eof = False
        self.err = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()
        self.next_id = 1

    def _read(self):
        for line in self.p.stdout:
            msg = json.loads(line)
            with self.cond:
                self.msgs[msg.get("id")] = msg
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def _read_err(self):
        self.err = self.p.stderr.read()

    def send(self, method, **params):
        rid = self.next_id
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()
        return rid

    def response(self, rid, timeout):
        """The response, or None once the server ended without one."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while rid not in self.msgs and not self.eof:
                left = deadline - time.monotonic()
                assert left > 0, f"no answer to request {rid} within {timeout} s (a hang)"
                self.cond.wait(left)
            return self.msgs.get(rid)

    def call(self, method, **params):
        r = self.response(self.send(method, **params), 60)
        assert r and "result" in r, r
        return r["result"]

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.close()
            except OSError:
                pass
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


# ---- one case ----------------------------------------------------------------------------------

def leaked(root, before):
    """What leaks.py counts, but only mounts under this state root: other
    suites running beside this one mount under /tmp/msb-* too."""
    now = Snapshot.take(root)
    return [x for x in now.leaked_since(before) if not x.startswith("mount ") or root in x]


@pytest.fixture
def root():
    yield from checked_state_root("/tmp/msb-faults-", leaked)


class Case:
    def __init__(self, root, point, victim, sig, tmp):
        self.root, self.point, self.victim, self.sig = root, point, victim, sig
        self.op, self.stopper, _ = POINTS[point]
        self.thread = "f"
        self.token = f"{4000 + os.getpid() % 1000}.{time.monotonic_ns() % 10**6}"
        self.tmp = tmp
        self.env = dict(os.environ, MSB_FAULT_POINT=point)
        self.common = ["--state-dir", root, *FLOOR]
        self.serve = None
        self.proc = None
        self.rid = None
        self.sink = os.path.join(tmp, "sink")

    def cli(self, *args, timeout=60):
        return msb(*args, timeout=timeout)

    def key_args(self, verb):
        extra = FLOOR if verb in ("acquire", "exec") else []
        return [verb, "--state-dir", self.root, *extra, "--thread", self.thread]

    # -- set-up and the faulted operation --

    def start(self):
        if self.op in ("acquire-warm", "exec", "dispose"):
            p = self.cli(*self.key_args("acquire"))
            assert p.returncode == 0, p.stderr
        if self.op in ("acquire", "acquire-warm"):
            self.popen(self.key_args("acquire"))
        elif self.op == "exec":
            self.popen(self.key_args("exec") + ["--timeout", "60", "--", "sh", "-c",
                                                f"echo started; exec sleep {self.token}"])
        elif self.op == "dispose":
            self.popen(self.key_args("dispose"))
        elif self.op == "outputs":
            os.mkdir(self.sink)
            self.popen(["run", *self.common, "--output", "out.txt", "--sink", self.sink, "--",
                        "sh", "-c", "printf whole > out.txt"])
        else:
            self.serve = Serve(self.env)
            s = self.serve
            router = s.call("router.new", config={"min_isolation": "container", "backends": [
                {"type": "ns", "state_dir": self.root}]})["router"]
            self.sb = s.call("router.acquire", router=router, spec={"kind": "shell"},
                             key={"scope": "cli", "thread_id": self.thread,
                                  "agent_dir": "cli"})["sandbox"]
            if self.op == "write":
                data = base64.b64encode(b"w" * WRITE_BYTES).decode()
                self.rid = s.send("sandbox.write_file", sandbox=self.sb, path="big", data=data)
            elif self.op == "read":
                s.call("sandbox.write_file", sandbox=self.sb, path="big",
                       data=base64.b64encode(b"r" * WRITE_BYTES).decode())
                self.rid = s.send("sandbox.read_file", sandbox=self.sb, path="big")
            else:
                self.rid = s.send("sandbox.reset", sandbox=self.sb, timeout=20)
            self.proc = s.p

    def popen(self, args):
        self.proc = subprocess.Popen([MSB, *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=self.env)

    def ended(self):
        rc = self.proc.poll()
        if rc is None:
            return None
        if self.serve:
            return f"serve exited {rc}: {self.serve.err.decode(errors='replace')}"
        out, err = self.proc.communicate()
        return f"exit {rc}: {out.decode(errors='replace')} {err.decode(errors='replace')}"

    def stopped(self):
        if self.stopper == "shim":
            return wait_stopped(lambda: shims(self.root), self.ended, "the shim")
        return wait_stopped(lambda: [self.proc.pid], self.ended, "the client")

    def victim_pid(self):
        if self.victim == "client":
            return self.proc.pid
        if self.victim == "shim":
            (pid,) = wait_for("the shim", lambda: shims(self.root), 10)
            return pid
        if self.victim == "agent":
            (pid,) = wait_for("the agent", lambda: agents(self.root), 10)
            return pid
        (pid,) = wait_for("the workload", lambda: workloads(self.token), 10)
        return pid

    # -- the outcome (a) --

    def finish(self):
        """Wait for the client; returns a description of how it ended."""
        if self.serve:
            if self.victim == "client":
                self.proc.wait(END_WAIT)
                return {"rc": self.proc.returncode}
            r = self.serve.response(self.rid, END_WAIT)
            rc = self.serve.close()
            return {"rc": rc, "response": r}
        try:
            out, err = self.proc.communicate(timeout=END_WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            pytest.fail(f"the client did not end within {END_WAIT} s (a hang)")
        return {"rc": self.proc.returncode, "out": out.decode(errors="replace"),
                "err": err.decode(errors="replace")}

    def check_outcome(self, end):
        rc = end["rc"]
        if self.victim == "client":
            if self.sig == signal.SIGKILL:
                assert rc == -signal.SIGKILL, end
                return
            # SIGTERM: the client may clean up and then die of it, or end typed.
            assert rc in (-signal.SIGTERM, 0) or typed(rc, end.get("err", "")), end
            return
        if self.serve:
            assert rc == 0, end
            r = end["response"]
            assert r is not None and ("result" in r or "error" in r), end
            if "error" in r:
                e = r["error"]
                assert e["code"] == -32000 and e["data"]["name"] in NAMES, end
            elif self.op == "write":
                assert r["result"]["written"] == WRITE_BYTES, end
            elif self.op == "read":
                assert base64.b64decode(r["result"]["data"]) == b"r" * WRITE_BYTES
            return
        assert rc >= 0, f"the client died of signal {-rc}: {end}"
        if self.victim == "workload" and rc == 128 + signal.SIGKILL:
            return  # the command's own status: it was killed
        assert rc == 0 or typed(rc, end["err"]), end
        if self.op.startswith("acquire") and self.victim in ("shim", "agent"):
            # Killed before the acquire went on: never a handle to it. A
            # fresh sandbox that died starting is not created (and removed);
            # a warm one is refused until disposed of.
            want = "SandboxUnclean" if self.op == "acquire-warm" else "RuntimeError"
            assert rc != 0 and f"msb: {want}: " in end["err"], \
                f"the acquire handed out a sandbox whose {self.victim} was killed: {end}"
        if self.op == "exec" and self.victim in ("shim", "agent"):
            # The sandbox died under the exec: said so, by name (docs/ns.md).
            assert rc == 1 and "msb: SandboxGone: " in end["err"], end

    # -- (b) --

    def check_ls(self):
        """Only a sandbox whose shim and agent live is `running` - at once,
        not once the shim has recorded the agent's death. (A shim starting
        or resetting its sandbox has no init.pid yet: a client killed during
        an acquire leaves the start to go on.)"""
        p = self.cli("ls", "--state-dir", self.root, "--json")
        assert p.returncode == 0, p.stderr
        entries = unpooled(json.loads(p.stdout))  # the warm pool's: test_pool.py
        for e in entries:
            assert e["state"] in ("running", "dead", "stale"), e
            if e["state"] != "running":
                continue
            d = os.path.join(self.root, "ns", e["name"])
            pids = {}
            for f in ("shim.pid", "init.pid"):
                try:
                    with open(os.path.join(d, f)) as fh:
                        pids[f] = int(fh.read().split()[0])
                except (OSError, ValueError, IndexError):
                    pids[f] = None
            assert pids["shim.pid"] and alive(pids["shim.pid"]) and \
                (pids["init.pid"] is None or alive(pids["init.pid"])), \
                f"reported running, but its shim or agent is dead: {e} {pids}"
        return entries

    # -- (c) --

    def check_recovery(self, entries):
        if self.op == "outputs":
            # A call's key is its own: a new run works.
            p = self.cli("run", *self.common, "--", "true")
            assert p.returncode == 0, p.stderr
            return
        p = self.cli(*self.key_args("acquire"))
        if p.returncode != 0:
            err = p.stderr.decode()
            assert p.returncode == 3 and "SandboxUnclean" in err and "is dead" in err, \
                (p.returncode, err)
            d = self.cli("dispose", "--state-dir", self.root, "--thread", self.thread)
            assert d.returncode == 0, d.stderr
            p = self.cli(*self.key_args("acquire"))
            assert p.returncode == 0, p.stderr
        p = self.cli(*self.key_args("exec"), "--", "sh", "-c", "ls -A; cat big 2>/dev/null | wc -c")
        assert p.returncode == 0, p.stderr
        # A write cut short leaves nothing in the storage base: not part of
        # the file, not a temporary under another name. (A SIGTERM reaches a
        # stopped process only once it runs again, and may let it finish.)
        if self.op == "write" and self.victim == "client":
            *names, size = p.stdout.decode().split()
            whole = self.sig == signal.SIGTERM and names == ["big"] and int(size) == WRITE_BYTES
            assert names == [] or whole, p.stdout

    # -- (d) --

    def purge_all(self, before):
        p = self.cli("ls", "--state-dir", self.root, "--json")
        for e in unpooled(json.loads(p.stdout)):
            q = self.cli("purge", "--state-dir", self.root, "--scope", e["scope"], "--thread",
                         e["thread_id"])
            assert q.returncode == 0, q.stderr
        failed = drain_pool(self.root)
        assert not failed, failed
        leaks = leaked(self.root, before)
        assert not leaks, f"left behind after purge: {leaks}"

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
        for pid in shims(self.root):
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass


@pytest.mark.parametrize("point, victim, sig", CASES)
def test_fault(root, point, victim, sig, tmp_path):
    before = Snapshot.take(root)
    c = Case(root, point, victim, sig, str(tmp_path))
    try:
        c.start()
        stopped = c.stopped()
        target = c.victim_pid()
        os.kill(target, sig)
        if sig == signal.SIGKILL:
            # Killed at this step: dying (exiting, a zombie or gone) before
            # anything else goes on - on a loaded machine it may otherwise
            # be scheduled after the stopped process resumes.
            wait_for("the victim to die", lambda: not alive(target), 10)
        if alive(stopped):
            os.kill(stopped, signal.SIGCONT)
        end = c.finish()
        if os.environ.get("MSB_FAULTS_LOG"):
            with open(os.environ["MSB_FAULTS_LOG"], "a") as f:
                f.write(f"{point}-{victim}-{sig.name}: {json.dumps(end)[:300]}\n")
        c.check_outcome(end)
        if c.victim == "client" and c.op == "exec":
            # The agent ends what a vanished client was running.
            wait_for("the workload to end with its client", lambda: not workloads(c.token), 10)
        if c.op == "outputs" and victim == "client" and sig == signal.SIGTERM:
            # A call's sandbox is disposed of when the call ends, on a
            # SIGTERM too; then msb dies of the signal.
            assert end["rc"] == -signal.SIGTERM, end
            p = msb("ls", "--state-dir", root, "--json")
            assert unpooled(json.loads(p.stdout)) == [], p.stdout
        if c.op == "outputs":
            for name in os.listdir(c.sink):
                with open(os.path.join(c.sink, name), "rb") as f:
                    assert f.read() == b"whole", name  # whole or absent
        entries = c.check_ls()
        c.check_recovery(entries)
        c.purge_all(before)
    finally:
        c.cleanup()


def test_the_agent_and_workloads_never_see_the_fault_variable(root):
    """The shim needs MSB_FAULT_POINT (shim.spawned) and inherits it; the
    agent's environment is built from nothing and a workload's from the
    request, so neither ever carries it."""
    env = dict(os.environ, MSB_FAULT_POINT="dispose.shim_stopped")
    p = msb("exec", "--state-dir", root, *FLOOR, "--thread", "env", "--", "env", env=env)
    assert p.returncode == 0, p.stderr
    assert b"MSB_FAULT_POINT" not in p.stdout and b"PATH=" in p.stdout, p.stdout
    (shim,) = shims(root)
    (agent,) = agents(root)
    with open(f"/proc/{shim}/environ", "rb") as f:
        assert b"MSB_FAULT_POINT=dispose.shim_stopped" in f.read().split(b"\0")
    with open(f"/proc/{agent}/environ", "rb") as f:
        environ = f.read()
    assert b"MSB_FAULT_POINT" not in environ and b"MSB_AGENT_LISTEN_FD" in environ, environ
    assert msb("purge", "--state-dir", root, "--scope", "cli", "--thread",
               "env").returncode == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_msb_run_ends_its_call_on_a_signal(root, sig):
    """`msb run` told to stop while its command runs cancels the command,
    disposes of the call's sandbox and dies of the signal: nothing stays
    running with nobody to dispose of it."""
    token = f"{5000 + os.getpid() % 1000}.{time.monotonic_ns() % 10**6}"
    p = subprocess.Popen([MSB, "run", "--state-dir", root, *FLOOR, "--", "sh", "-c",
                          f"echo started; exec sleep {token}"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for("the command to run", lambda: workloads(token), 20)
    os.kill(p.pid, sig)
    out, err = p.communicate(timeout=20)
    assert p.returncode == -sig, (p.returncode, err)
    assert b"CancelledError" in err, err
    assert not workloads(token)
    ls = msb("ls", "--state-dir", root, "--json")
    assert unpooled(json.loads(ls.stdout)) == [], ls.stdout
