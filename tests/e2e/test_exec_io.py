"""stdin, output, environment, terminals and working directories of `msb run`
and `msb exec`, and the same through `msb serve` and `msb mcp` (issue 16),
through the real binaries on the `ns` backend.

Each test gets its own state root, checked for leaks afterwards.
"""
import base64
import fcntl
import hashlib
import json
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import threading
import time

import pytest

from conftest import BUILD
from leaks import checked_state_root, unpooled

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the ns e2e suite runs as root")

MSB = os.path.join(BUILD, "cli", "msb")
FLOOR = ["--min-isolation", "container"]


@pytest.fixture
def state():
    yield from checked_state_root("/tmp/msb-exec-io-")


def run_argv(state, *args, verb="run"):
    return [MSB, verb, "--state-dir", state, *FLOOR, *args]


def exec_argv(state, *args, thread="t1"):
    return run_argv(state, "--thread", thread, *args, verb="exec")


def purge(msb, state, thread="t1"):
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread",
               thread).returncode == 0


def nothing_left(msb, state):
    """No sandbox of the run is left; the warm pool's wait for the next run
    (the fixture drains them and checks that nothing at all is left)."""
    p = msb("ls", "--state-dir", state, "--json")
    assert p.returncode == 0 and unpooled(json.loads(p.stdout)) == [], p.stdout


# ---- stdin ----------------------------------------------------------------------------

def test_a_piped_python_program_runs(msb, state):
    # The first example: stdin is not a terminal, so it is attached.
    p = msb("run", "--state-dir", state, *FLOOR, "--", "python3", "-",
            input=b"print(1+1)\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"2\n"


def test_stdin_end_of_file_ends_cat(msb, state):
    p = msb("run", "--state-dir", state, *FLOOR, "--", "cat", input=b"a\x00b\xff\n")
    assert p.returncode == 0 and p.stdout == b"a\x00b\xff\n", p.stderr
    # exec (a warm sandbox) the same, and an empty stdin is an immediate EOF
    p = msb(*exec_argv(state, "--", "wc", "-c")[1:], input=b"12345")
    assert p.returncode == 0 and p.stdout.strip() == b"5", p.stderr
    p = msb(*exec_argv(state, "--", "cat")[1:], input=b"")
    assert p.returncode == 0 and p.stdout == b""
    # --no-stdin: never attached, whatever is piped
    p = msb(*exec_argv(state, "--no-stdin", "--", "wc", "-c")[1:], input=b"12345")
    assert p.returncode == 0 and p.stdout.strip() == b"0", p.stderr
    purge(msb, state)


def test_a_large_stdin_is_streamed_not_slurped(state):
    """64 MiB of random bytes through sha256sum inside: the digest matches and
    msb's own memory stays far below the input (it holds one window at a time)."""
    size = 64 << 20
    data = os.urandom(1 << 20)
    want = hashlib.sha256()
    p = subprocess.Popen(run_argv(state, "--", "sha256sum"), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def feed():
        for i in range(size // len(data)):
            chunk = bytes([i & 0xff]) + data[1:]
            want.update(chunk)
            p.stdin.write(chunk)
        p.stdin.close()

    out = {}

    def drain(name, f):
        out[name] = f.read()

    hwm = [0]

    def watch():
        # msb's own peak resident size (VmHWM, KiB), sampled until it exits
        while p.poll() is None:
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            hwm[0] = max(hwm[0], int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.01)

    threads = [threading.Thread(target=feed),
               threading.Thread(target=drain, args=("out", p.stdout)),
               threading.Thread(target=drain, args=("err", p.stderr)),
               threading.Thread(target=watch)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    elapsed = time.monotonic() - t0
    assert p.wait(60) == 0, out["err"]
    assert out["out"].split()[0].decode() == want.hexdigest()
    # msb held a window at a time, never the 64 MiB it passed on
    assert 0 < hwm[0] < 40 * 1024, hwm[0]
    print(f"64 MiB through sha256sum in {elapsed:.2f} s, msb peak RSS {hwm[0]} KiB")


def test_output_is_streamed_as_it_comes(state):
    p = subprocess.Popen(run_argv(state, "--", "sh", "-c", "echo first; sleep 5; echo second"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    t0 = time.monotonic()
    line = p.stdout.readline()
    assert line == b"first\n" and time.monotonic() - t0 < 4.5, "not streamed"
    assert p.stdout.read() == b"second\n"
    assert p.wait(60) == 0


def test_a_closed_stdout_ends_the_command_and_disposes(msb, state):
    # `msb run -- yes | head -1`: msb is not killed by SIGPIPE half-way; it
    # cancels the command, disposes of the sandbox and exits 141.
    r, w = os.pipe()
    p = subprocess.Popen(run_argv(state, "--", "yes"), stdin=subprocess.DEVNULL, stdout=w,
                         stderr=subprocess.PIPE)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        assert f.read(4) == b"y\ny\n"
    assert p.wait(60) == 141, p.stderr.read()
    nothing_left(msb, state)


# ---- the environment ------------------------------------------------------------------

def test_env_and_env_file(msb, state, tmp_path):
    f = tmp_path / "vars.env"
    f.write_bytes(b"# a comment\n\n  A=from the file\nB=two  words = kept\r\n\tC=\n")
    p = msb("run", "--state-dir", state, *FLOOR, "--env-file", str(f), "--env", "A=from-flag",
            "--env", "D=x=y", "--", "sh", "-c", 'printf "%s|%s|%s|%s|" "$A" "$B" "${C-unset}" "$D"')
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"from-flag|two  words = kept||x=y|"


@pytest.mark.parametrize("how, phrase", [
    (["--env", "HTTPS_PROXY=http://elsewhere:3128"], b"`HTTPS_PROXY` is reserved"),
    (["--env", "no_proxy=*"], b"`no_proxy` is reserved"),
    (["--env", "PYTHONNOUSERSITE=0"], b"`PYTHONNOUSERSITE` is reserved"),
    (["--env", "PYTHONPATH=lib"], b"PYTHONPATH entry 1 `lib` is not absolute"),
    (["--env", "=x"], b"--env wants NAME=VALUE"),
    ("file:HTTP_PROXY=x\n", b"`HTTP_PROXY` is reserved"),
    ("file:OK=1\nnot an assignment\n", b"line 2 is not NAME=VALUE"),
])
def test_reserved_and_malformed_env_are_refused_before_anything_runs(msb, state, tmp_path,
                                                                     how, phrase):
    if isinstance(how, str):
        f = tmp_path / "bad.env"
        f.write_text(how[len("file:"):])
        how = ["--env-file", str(f)]
    p = msb("run", "--state-dir", state, *FLOOR, *how, "--", "true")
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert phrase in p.stderr, p.stderr
    nothing_left(msb, state)  # refused before a sandbox was made


# ---- terminals -------------------------------------------------------------------------

class Term:
    """msb on a pseudo-terminal of the test's: the test is the user's terminal."""

    def __init__(self, argv, rows=30, cols=90):
        self.master, self.slave = pty.openpty()
        self.resize(rows, cols)
        self.mode = termios.tcgetattr(self.slave)

        def ctty():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.p = subprocess.Popen(argv, stdin=self.slave, stdout=self.slave, stderr=self.slave,
                                  preexec_fn=ctty, close_fds=True)
        self.buf = b""

    def resize(self, rows, cols):
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def type(self, text):
        os.write(self.master, text)

    def expect(self, what, timeout=30):
        deadline = time.monotonic() + timeout
        while what not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, f"no {what!r} in {self.buf[-400:]!r}"
            r, _, _ = select.select([self.master], [], [], left)
            if r:
                try:
                    self.buf += os.read(self.master, 65536)
                except OSError:
                    break
        assert what in self.buf, self.buf[-400:]

    def wait(self, timeout=60):
        # keep reading so that msb never blocks on a full terminal
        deadline = time.monotonic() + timeout
        while self.p.poll() is None and time.monotonic() < deadline:
            r, _, _ = select.select([self.master], [], [], 0.1)
            if r:
                try:
                    self.buf += os.read(self.master, 65536)
                except OSError:
                    pass
        return self.p.wait(1)

    def restored(self):
        return termios.tcgetattr(self.slave) == self.mode

    def close(self):
        os.close(self.master)
        os.close(self.slave)


def test_a_tty_session_types_resizes_and_exits_with_its_status(msb, state):
    t = Term(run_argv(state, "-t", "--env", "PS1=msb$ ", "--", "bash", "--norc", "--noprofile",
                      "-i"))
    try:
        t.expect(b"msb$ ")
        t.type(b"stty size; tty\r")
        t.expect(b"30 90\r\n/dev/pts/")
        t.type(b"test -t 0 && test -t 2 && echo both-terminals\r")
        t.expect(b"both-terminals\r\n")
        # the user's terminal grows: the kernel tells msb (SIGWINCH), msb
        # tells the agent, the agent the command's terminal
        t.resize(40, 120)
        os.kill(t.p.pid, signal.SIGWINCH)
        time.sleep(0.5)
        t.type(b"stty size\r")
        t.expect(b"40 120\r\n")
        # raw mode on the host side: ^C is a byte for the command's terminal
        t.type(b"sleep 30\r")
        time.sleep(0.5)
        t.type(b"\x03")
        t.expect(b"msb$ ", timeout=10)
        assert t.p.poll() is None, "^C reached msb instead of the command"
        t.type(b"exit 7\r")
        assert t.wait() == 7
        assert t.restored(), "the terminal's mode was not restored"
    finally:
        if t.p.poll() is None:
            t.p.kill()
        t.close()
    nothing_left(msb, state)


def test_exec_tty_on_a_warm_sandbox(msb, state):
    assert msb(*exec_argv(state, "--", "true")[1:]).returncode == 0
    t = Term(exec_argv(state, "-t", "--", "sh", "-c", "stty size; read x; echo got:$x; exit 3"),
             rows=33, cols=77)
    try:
        t.expect(b"33 77\r\n")
        t.type(b"hello\r")
        t.expect(b"got:hello\r\n")
        assert t.wait() == 3
        assert t.restored()
    finally:
        t.close()
    purge(msb, state)


def test_a_signal_restores_the_terminal_and_disposes(msb, state):
    t = Term(run_argv(state, "-t", "--", "sh", "-c", "echo started; sleep 100"))
    try:
        t.expect(b"started")
        assert not t.restored(), "raw mode while the command runs"
        t.p.send_signal(signal.SIGTERM)
        assert t.wait() == -signal.SIGTERM  # msb dies of it, after disposing
        assert t.restored()
        assert b"the command was cancelled" in t.buf
    finally:
        t.close()
    nothing_left(msb, state)


# ---- working directories ------------------------------------------------------------------

def test_exec_working_directories(msb, state):
    assert msb(*exec_argv(state, "--", "mkdir", "-p", "sub/deeper")[1:]).returncode == 0
    for wd, want in [("/", b"/\n"), ("/etc", b"/etc\n"), ("sub", b"/maf-sandbox/work/sub\n"),
                     ("sub/deeper/..", b"/maf-sandbox/work/sub\n"),
                     ("..", b"/maf-sandbox\n")]:
        p = msb(*exec_argv(state, "--workdir", wd, "--", "pwd")[1:])
        assert p.returncode == 0 and p.stdout == want, (wd, p.stdout, p.stderr)
    # missing: the status an engine's `exec -w` gives, the reason on stderr
    p = msb(*exec_argv(state, "--workdir", "/no/such", "--", "pwd")[1:])
    assert p.returncode == 126 and p.stdout == b"", p.stderr
    assert b"working directory `/no/such`: No such file or directory" in p.stderr
    p = msb(*exec_argv(state, "--workdir", "gone", "--", "pwd")[1:])
    assert p.returncode == 126
    assert b"working directory `/maf-sandbox/work/gone`: No such file" in p.stderr
    purge(msb, state)


# ---- serve and mcp --------------------------------------------------------------------------

class Lines:
    """A JSON-lines child (msb serve, msb mcp): one request, one answer."""

    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.id = 0

    def call(self, method, **params):
        self.id += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method,
                                       "params": params}).encode() + b"\n")
        self.p.stdin.flush()
        while True:
            msg = json.loads(self.p.stdout.readline())
            if msg.get("id") == self.id:
                return msg

    def close(self):
        self.p.stdin.close()
        return self.p.wait(60)


def test_serve_exec_tty_env_and_working_directory(state):
    s = Lines([MSB, "serve"])
    try:
        cfg = {"min_isolation": "container", "backends": [{"type": "ns", "state_dir": state}]}
        router = s.call("router.new", config=cfg)["result"]["router"]
        key = {"scope": "app", "thread_id": "t1", "agent_dir": "agent"}
        # the spec's env (issue 16): every exec starts from it, the exec's own
        # entries win name by name; refused at the spec like --env
        spec = {"kind": "shell", "env": {"FROM_SPEC": "s", "BOTH": "spec"}}
        e = s.call("router.acquire", router=router, key=key,
                   spec={"kind": "shell", "env": {"HTTP_PROXY": "x"}})["error"]
        assert e["data"]["name"] == "ValueError" and "`HTTP_PROXY` is reserved" in e["message"]
        e = s.call("router.acquire", router=router, key=key,
                   spec={"kind": "shell", "env": {"N": 1}})["error"]
        assert e["data"]["name"] == "TypeError" and "spec.env.N: must be a string" in \
            e["message"], e
        sb = s.call("router.acquire", router=router, key=key, spec=spec)["result"]["sandbox"]

        def ex(**kw):
            return s.call("sandbox.exec", sandbox=sb, **kw)

        r = ex(shell='printf "%s %s %s" "$FROM_SPEC" "$BOTH" "$X"', env={"BOTH": "req", "X": "x"})
        assert base64.b64decode(r["result"]["stdout"]) == b"s req x", r
        r = s.call("sandbox.exec_bounded", sandbox=sb, shell='printf "%s" "$BOTH"',
                   max_output_bytes=100)["result"]
        assert base64.b64decode(r["stdout"]) == b"spec"

        r = ex(shell="stty size; echo out; echo err >&2", tty=True, rows=33, cols=77)["result"]
        assert base64.b64decode(r["stdout"]) == b"33 77\r\nout\r\nerr\r\n"
        assert r["stderr"] == "" and r["exit_code"] == 0
        e = ex(shell="true", tty=True, rows=0)["error"]
        assert e["code"] == -32602 and "1..4096" in e["message"]
        e = ex(shell="true", env=["https_proxy=http://x"])["error"]
        assert e["data"]["name"] == "ValueError" and "reserved" in e["data"]["message"]
        r = ex(argv=["pwd"], working_directory="/")["result"]
        assert base64.b64decode(r["stdout"]) == b"/\n"
        r = ex(argv=["pwd"], working_directory="/missing")["result"]
        assert r["exit_code"] == 126
        assert b"No such file" in base64.b64decode(r["stderr"])
        # the file plane keeps its confinement
        e = s.call("sandbox.read_file", sandbox=sb, path="passwd", working_directory="/etc",
                   max_bytes=100)["error"]
        assert e["data"]["name"] == "ValueError", e
        s.call("router.dispose", router=router, key=key)
    finally:
        assert s.close() == 0


def test_mcp_execute_with_env_and_a_terminal(state):
    m = Lines([MSB, "mcp", *FLOOR, "--state-dir", state])
    try:
        r = m.call("initialize", protocolVersion="2025-06-18", capabilities={},
                   clientInfo={"name": "t", "version": "1"})
        assert "result" in r, r

        def execute(**args):
            return m.call("tools/call", name="execute", arguments=args)["result"]

        r = execute(command='echo "$GREETING"; stty size', env={"GREETING": "hi there"},
                    tty=True, rows=20, cols=60)
        assert not r["isError"], r
        assert r["structuredContent"]["stdout"] == "hi there\r\n20 60\r\n"
        r = execute(command="true", env={"HTTP_PROXY": "http://x"})
        assert r["isError"] and "`HTTP_PROXY` is reserved" in r["content"][0]["text"]
        # a value that is not a string, or a name holding `=`, names the key (issue 16)
        e = m.call("tools/call", name="execute", arguments={"command": "true", "env": {"N": 1}})
        assert "`env.N`: must be a string" in json.dumps(e), e
        e = m.call("tools/call", name="execute",
                   arguments={"command": "true", "env": {"A=B": "x"}})
        assert "`env.A=B`: a name holds no `=`" in json.dumps(e), e
        r = execute(command="pwd", working_directory="/")
        assert r["structuredContent"]["stdout"] == "/\n"
    finally:
        assert m.close() == 0


def test_mcp_spec_env_from_the_config_file(state, tmp_path):
    # Issue 16: the spec of `msb mcp --config` carries env; `execute`'s own wins.
    spec = {"kind": "mcp", "requires": ["exec", "files_in", "files_out"],
            "env": {"FROM_SPEC": "m", "BOTH": "spec"}}
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"router": {"min_isolation": "container", "backends": [
        {"type": "ns", "state_dir": state}]}, "spec": spec}))
    m = Lines([MSB, "mcp", "--config", str(cfg)])
    try:
        assert "result" in m.call("initialize", protocolVersion="2025-06-18", capabilities={},
                                  clientInfo={"name": "t", "version": "1"})
        r = m.call("tools/call", name="execute", arguments={
            "command": 'printf "%s %s" "$FROM_SPEC" "$BOTH"', "env": {"BOTH": "call"}})["result"]
        assert r["structuredContent"]["stdout"] == "m call", r
    finally:
        assert m.close() == 0
    spec["env"] = {"NO_PROXY": "*"}
    cfg.write_text(json.dumps({"router": {"min_isolation": "container", "backends": [
        {"type": "ns", "state_dir": state}]}, "spec": spec}))
    p = subprocess.run([MSB, "mcp", "--config", str(cfg)], input=b"", capture_output=True,
                       timeout=60)
    assert p.returncode == 2 and b"`NO_PROXY` is reserved" in p.stderr, p
