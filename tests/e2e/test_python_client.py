"""bindings/python: the stdlib-only client of `msb serve` (issue 10).

The exception table is checked against include/msb/error.h (every name) and
src/util/error.c (every family), then the package is driven against the
"fake" and "ns" backends, concurrently, and the example agent loop is run.
"""
import builtins
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD, ROOT
from leaks import checked_state_root

sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
import msb  # noqa: E402
from msb import errors as msb_errors  # noqa: E402

MSB = os.path.join(BUILD, "cli", "msb")
FAKE = {"min_isolation": "none", "backends": [{"type": "fake"}]}
KEY = msb.Key("app", "t1", "agent")
SPEC = {"kind": "shell"}
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the ns backend runs as root here")


def header_codes():
    """MSB_E_* -> the name its comment gives (None when the comment is prose)."""
    with open(os.path.join(ROOT, "include", "msb", "error.h")) as f:
        rows = re.findall(r"(MSB_E_\w+) =\s*-\d+,\s*/\* ([^*]*?)\s*\*/", f.read())
    return {code: (c.split()[0] if re.fullmatch(r"\w+( \(.*\))?", c) else None)
            for code, c in rows}


def library_names():
    """MSB_E_* -> msb_code_name() as src/util/error.c's table defines it."""
    with open(os.path.join(ROOT, "src", "util", "error.c")) as f:
        return dict(re.findall(r'\{(MSB_E_\w+), "(\w+)", [A-Z |]+, \d+\}', f.read()))


def test_one_class_per_error_name_of_the_header():
    header, lib = header_codes(), library_names()
    assert len(header) > 30 and set(header) == set(lib)
    for code, name in header.items():
        assert name in (None, lib[code]), code  # the header's comment is the seed name
    assert set(lib.values()) == set(msb.ERRORS)
    for n in lib.values():
        cls = getattr(msb, n)
        assert cls.__name__ == n and issubclass(cls, msb.MsbError)


def test_families_match_the_library():
    """Each class derives from the built-in family its code is in (error.c)."""
    flags = {"P": builtins.PermissionError, "R": builtins.RuntimeError,
             "L": builtins.LookupError, "V": builtins.ValueError, "T": builtins.TypeError,
             "O": builtins.OSError, "TM": builtins.TimeoutError,
             "NI": builtins.NotImplementedError, "A": builtins.AssertionError,
             "OUT": msb.SandboxOutputError}
    with open(os.path.join(ROOT, "src", "util", "error.c")) as f:
        rows = re.findall(r'\{MSB_E_\w+, "(\w+)", ([A-Z |]+), \d+\}', f.read())
    assert len(rows) == len(header_codes())
    for name, fam in rows:
        fams = [x.strip() for x in fam.split("|")]
        assert sorted(fams) == sorted(msb_errors.ERROR_FAMILIES[name].split()), name
        for x in fams:
            if x in flags:
                assert issubclass(getattr(msb, name), flags[x]), (name, x)
    assert issubclass(msb.SandboxEgressNotEnforced, PermissionError)
    assert issubclass(msb.SandboxProgramTimeout, TimeoutError)
    assert issubclass(msb.SandboxTransferCapExceeded, msb.SandboxOutputError)


@pytest.fixture
def client():
    c = msb.Client(MSB)
    yield c
    c.close()


def test_router_sandbox_and_errors_over_the_fake(client):
    assert client.version()
    r = client.router(FAKE)
    assert r.enabled and r.backends == [{"name": "in-process", "isolation": "none"}]
    assert r.resolve(SPEC)["backend"] == "in-process"
    sb = r.acquire(KEY, SPEC)
    assert sb.backend == "in-process" and sb.instance_id
    assert sb.write_file("a.bin", b"\x00\xff") == 2
    assert sb.read_file("a.bin") == b"\x00\xff"
    assert sb.stat("a.bin")["size_bytes"] == 2 and sb.stat("nope") is None
    assert [e["path"] for e in sb.list()] == ["a.bin"]
    sb.remove("a.bin")
    with pytest.raises(msb.NotImplementedError):
        sb.reset()
    with pytest.raises(msb.InvalidParams):
        sb.exec()  # neither argv nor shell
    with pytest.raises(msb.MethodNotFound):
        client.call("no.such.method")
    assert r.dispose(KEY) is True
    assert any(e["event"] == "SandboxAcquired" for e in client.events)
    sb.release()
    r.close()


def test_policy_refusal_is_raised_by_its_seed_name(client):
    r = client.router({"min_isolation": "none", "backends": [
        {"type": "declared", "name": "d", "isolation": "container",
         "declarations": {"egress_modes": ["closed"]}}]})
    spec = {"kind": "k", "egress": "allowlist", "egress_allow": ["example.com"]}
    with pytest.raises(msb.SandboxEgressNotEnforced) as e:
        r.ensure_can_serve(spec)
    assert isinstance(e.value, PermissionError)
    assert e.value.code == -1107 and "permission" in e.value.categories
    assert "cannot enforce the 'allowlist' egress" in str(e.value)
    with pytest.raises(msb.SandboxBackendNotPermitted):
        client.router({"backends": [{"type": "fake"}]})


def test_session_and_calls(client):
    r = client.router(FAKE)
    tool = r.session(SPEC, name="t")
    with tool.begin_call(scope="app", thread_id="t2") as call:
        assert call.key() == msb.Key("app", "t2", "rpc")
        sb = call.acquire()
        assert isinstance(sb, msb.Sandbox)
        call.result("ok")
    assert call.items == [{"text": "ok", "guidance": False}]
    with pytest.raises(ZeroDivisionError):
        with tool.begin_call(scope="app", thread_id="t2") as call:
            1 / 0
    ended = [e for e in client.events if e["event"] == "ToolCallEnded"]
    assert [e["outcome"] for e in ended][:2] == ["result", "RuntimeError"]
    assert tool.properties() == {"source_integrity": "trusted"}
    assert r.options()["min_isolation"] == "none"
    assert r.purge_scoped_thread("app", "t2")[1] == 0
    with tool.begin_call(scope="app", thread_id="t3") as call:
        call.report_unclean(call.acquire(), "a survivor")
    assert call.items == [{"text": "", "guidance": False}]
    c = tool.begin_call()
    assert "no active thread context" in c.acquire()
    c.end(kind="refusal", text="no")
    assert r.__class__ is msb.Router and client.router({}).session(SPEC) is None


def test_concurrent_calls_from_threads(client):
    r = client.router(FAKE)

    def one(i):
        sb = r.acquire(msb.Key("app", f"t{i}", "agent"), SPEC)
        sb.write_file(f"f{i}", str(i).encode())
        return sb.read_file(f"f{i}")
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        got = list(pool.map(one, range(64)))
    assert got == [str(i).encode() for i in range(64)]


def test_oversized_request_is_refused_before_it_is_sent():
    with msb.Client(MSB, max_message=4096) as c:
        sb = c.router(FAKE).acquire(KEY, SPEC)
        with pytest.raises(msb.InvalidParams) as e:
            sb.write_file("big", b"x" * 10000)
        assert "4096-byte message limit" in str(e.value)
        assert sb.write_file("small", b"x" * 100) == 100  # the connection still serves
        assert c.unattributed == []


def test_server_gone_after_close():
    c = msb.Client(MSB)
    assert c.close() == 0
    with pytest.raises(msb.ServerGone):
        c.version()


@pytest.fixture
def state():
    yield from checked_state_root("/tmp/msb-py-")


@needs_root
def test_over_ns(client, state):
    r = client.router({"min_isolation": "container",
                       "backends": [{"type": "ns", "state_dir": state}]})
    sb = r.acquire(KEY, SPEC)
    res = sb.exec(["sh", "-c", "printf 'a\\000b'; exit 4"])
    assert res.stdout == b"a\x00b" and res.exit_code == 4
    assert sb.exec(shell="cat", stdin=b"xyz").stdout == b"xyz"
    # a terminal inside (issue 16): one stream, its size as asked
    assert sb.exec(shell="stty size >&2", tty=True, rows=21, cols=61).stdout == b"21 61\r\n"
    assert sb.exec_bounded(10, shell="head -c 1000 /dev/zero").truncated
    with pytest.raises(msb.TimeoutError) as e:
        sb.exec(shell="echo part; sleep 30", timeout=0.5)
    assert isinstance(e.value, TimeoutError)
    assert e.value.payload["output"]  # base64 of the partial output
    sb.write_file("big", b"x" * 5000)
    with pytest.raises(msb.SandboxTransferCapExceeded) as e:
        sb.read_file("big", max_bytes=100)
    assert e.value.payload["cap"] == "max_bytes_per_file"
    with pytest.raises(msb.FileNotFoundError):
        sb.read_file("missing")
    assert r.dispose(KEY) is True


@needs_root
def test_example_agent_loop_runs(state):
    env = dict(os.environ, MSB_BIN=MSB)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bindings", "python", "examples",
                                                     "agent_loop.py"), "--state-dir", state],
                       capture_output=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr.decode()
    out = p.stdout.decode()
    # The file written by the first call was there for the third: one conversation.
    assert "observation: 'answer.py'" in out
    assert "disposed 1 sandbox(es), 0 left" in out
    # The declared output was collected into the host's directory.
    assert "observation: 'landed: answer.py (13 bytes)'" in out, out
    landed = out.split("outputs are in ")[1].strip()
    with open(os.path.join(landed, "answer.py")) as f:
        assert f.read() == "print(6 * 7)\n"
    shutil.rmtree(landed)


def test_example_agent_loop_runs_on_the_fake():
    env = dict(os.environ, MSB_BIN=MSB)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bindings", "python", "examples",
                                                     "agent_loop.py"), "--fake"],
                       capture_output=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr.decode()
    assert "model: the answer is 42" in p.stdout.decode()


def test_collect_outputs_from_python_12_1_12_27(client, tmp_path):
    spec = {"kind": "report", "declared_outputs": [{"path": "r.txt", "media_type": "text/plain"}],
            "outputs_named_at_call_time": True}
    r = client.router(FAKE)
    sb = r.acquire(KEY, spec)
    sb.write_file("r.txt", b"report")
    sb.write_file("extra.txt", b"more")
    got = sb.collect_outputs(spec, sink=tmp_path, outputs=[{"path": "extra.txt"}],
                             call_id="c9", key=KEY)
    assert [a["name"] for a in got] == ["r.txt", "extra.txt"]
    assert (tmp_path / "r.txt").read_bytes() == b"report" and got[0]["size_bytes"] == 6
    with pytest.raises(msb.SandboxLandingExists) as e:
        sb.collect_outputs(spec, sink=tmp_path)
    assert isinstance(e.value, msb.SandboxOutputError)
    assert len(sb.collect_outputs(spec, sink=tmp_path, existing="replace")) == 1
    with pytest.raises(msb.SandboxOutputSinkRequired):
        sb.collect_outputs(spec)
    with pytest.raises(msb.SandboxOutputMissing):
        sb.collect_outputs({"kind": "k", "declared_outputs": [{"path": "gone"}]}, sink=tmp_path)
    r.dispose(KEY)


def test_host_tool_registry_from_python_13_6(client):
    reg = client.host_tools(require_declared=True)

    @reg.tool(parameters={"type": "object", "properties": {"x": {"type": "integer"}}},
              declaration={"source": None, "sink": None, "identity": None})
    def double(x):
        return 2 * x
    with pytest.raises(msb.HostToolNotDeclared):
        reg.register("bare", lambda: 1)
    assert ("bare" not in [k[1] for k in client._tools])
    assert reg.aggregate()["names"] == ["double"]
    with pytest.raises(msb.ValueError):
        reg.register("late", lambda: 1, declaration={"source": None, "sink": None,
                                                     "identity": None})
    reg.close()


GUEST = """
print("double", t.call("double", x=21))
try:
    t.call("double", x="many")
except t.HostToolError as e:
    print("refused", e)
try:
    t.call("fail")
except t.HostToolError as e:
    print("failed", e)
"""


@needs_root
@pytest.mark.parametrize("transport,module", [("exec", "maf_host_tools"),
                                              ("native", "msb_host_tools")])
def test_guest_program_calls_python_callables_13_18_14_1(client, state, transport, module):
    """A guest Python program on ns calls host tools registered by this client;
    the reader thread answers them; a schema violation is refused by the library
    with the seed's sentence and never reaches the callable."""
    r = client.router({"min_isolation": "container",
                       "backends": [{"type": "ns", "state_dir": state}]})
    sb = r.acquire(KEY, SPEC)
    reg = client.host_tools(max_calls_per_run=4)
    calls = []
    pure = {"source": None, "sink": None, "identity": None}

    def double(x):
        calls.append(x)
        return 2 * x

    def fail():
        raise KeyError("private detail")
    reg.register("double", double, declaration=pure,
                 parameters={"type": "object", "properties": {"x": {"type": "integer"}},
                             "required": ["x"]})
    reg.register("fail", fail, declaration=pure)
    res = sb.run_with_host_tools(reg, f"import {module} as t\n" + GUEST, transport=transport,
                                 timeout=60, poll_interval=0.02)
    out = res.text
    assert res.exit_code == 0, out + res.stderr.decode()
    assert "double 42" in out and calls == [21]
    assert "refused Error: arguments do not bind to host tool 'double'" in out
    assert "failed Error: host tool 'fail' failed" in out and "private" not in out
    assert res.calls == 3 and res.delivered == 1
    assert r.dispose(KEY) is True
