"""`msb serve`: JSON-RPC 2.0 over stdio, every method and every error path (issue 10).

A raw client speaks the wire protocol itself (no bindings), so what is tested
is exactly what any language's client sees: lines in, lines out. Backends
"fake" (in-process, no root needed) and "ns" (real sandboxes, root, own state
root, leak-checked).
"""
import base64
import json
import os
import subprocess
import threading
import time

import pytest

from conftest import BUILD
from leaks import checked_state_root

MSB = os.path.join(BUILD, "cli", "msb")
FAKE = {"min_isolation": "none", "backends": [{"type": "fake"}]}
KEY = {"scope": "app", "thread_id": "t1", "agent_dir": "agent"}
SPEC = {"kind": "shell"}
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the ns backend runs as root here")


def b64(data):
    return base64.b64encode(data).decode()


def unb64(text):
    return base64.b64decode(text)


class Serve:
    """msb serve as a child; every line it writes is kept and matched by id."""

    def __init__(self, *args, env=None):
        self.p = subprocess.Popen([MSB, "serve", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.stderr = b""
        self.t_err = threading.Thread(target=self._read_err, daemon=True)
        self.t_err.start()
        self.cond = threading.Condition()
        self.lines = []  # every message, in arrival order
        self.next_id = 1000  # raw messages in the tests use small ids
        self.on_request = None  # server->client requests (host_tool.call) go here
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            msg = json.loads(line)  # every line the server writes is one JSON value
            if isinstance(msg, dict) and "method" in msg and "id" in msg and self.on_request:
                threading.Thread(target=self.on_request, args=(msg,), daemon=True).start()
            with self.cond:
                self.lines.append(msg)
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)
            self.cond.notify_all()

    def _read_err(self):
        self.stderr = self.p.stderr.read()

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, method, params=None, id=None, notify=False):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if not notify:
            if id is None:
                id = self.next_id
                self.next_id += 1
            msg["id"] = id
        self.send_raw(json.dumps(msg).encode() + b"\n")
        return id

    def wait_for(self, pred, timeout=30):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for m in self.lines:
                    if m is not None and pred(m):
                        return m
                left = deadline - time.monotonic()
                assert left > 0, f"no matching message; got {self.lines}"
                self.cond.wait(left)

    def response(self, id, timeout=60):
        return self.wait_for(lambda m: isinstance(m, dict) and m.get("id") == id and
                             ("result" in m or "error" in m), timeout)

    def next_null_error(self, after=0, timeout=30):
        """The first error response with id null at or after index `after`."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for m in self.lines[after:]:
                    if isinstance(m, dict) and "error" in m and m.get("id") is None:
                        return m
                left = deadline - time.monotonic()
                assert left > 0, f"no error; got {self.lines[after:]}"
                self.cond.wait(left)

    def call(self, method, **params):
        r = self.response(self.send(method, params))
        assert "result" in r, r
        return r["result"]

    def error(self, method, params=None):
        r = self.response(self.send(method, params))
        assert "error" in r, r
        return r["error"]

    def events(self):
        with self.cond:
            return [m["params"] for m in self.lines
                    if isinstance(m, dict) and m.get("method") == "event"]

    def close(self, timeout=60):
        self.p.stdin.close()
        rc = self.p.wait(timeout)
        self.t.join(timeout)
        return rc


@pytest.fixture
def serve():
    servers = []

    def start(*args, env=None):
        s = Serve(*args, env=env)
        servers.append(s)
        return s
    yield start
    for s in servers:
        if s.p.poll() is None:
            s.p.kill()
            s.p.wait()
        s.t_err.join(10)
        # Under build-asan a sanitizer report fails the test that caused it.
        assert b"Sanitizer" not in s.stderr and b"runtime error:" not in s.stderr, \
            s.stderr.decode(errors="replace")


@pytest.fixture
def fake(serve):
    s = serve()
    s.router = s.call("router.new", config=FAKE)["router"]
    return s


@pytest.fixture
def state():
    yield from checked_state_root("/tmp/msb-serve-")


def ns_config(state, floor="container"):
    return {"min_isolation": floor, "backends": [{"type": "ns", "state_dir": state}]}


@pytest.fixture
def ns(serve, state):
    s = serve()
    s.state = state
    s.router = s.call("router.new", config=ns_config(state))["router"]
    s.sandbox = s.call("router.acquire", router=s.router, key=KEY, spec=SPEC)["sandbox"]
    yield s
    s.call("router.dispose", router=s.router, key=KEY)
    assert s.close() == 0


# ---- the protocol ------------------------------------------------------------------------------

def test_version_and_ids_of_every_json_type(serve):
    s = serve()
    for rid in ["abc", 7, 2.5]:
        r = s.response(s.send("msb.version", id=rid))
        assert r["jsonrpc"] == "2.0" and r["id"] == rid
        assert r["result"]["version"]
    # An explicit null id is a request (answered with id null), not a notification.
    s.send_raw(b'{"jsonrpc":"2.0","id":null,"method":"msb.version"}\n')
    r = s.wait_for(lambda m: m.get("id", 0) is None and "result" in m)
    assert r["result"]["protocol"] == "msb-serve/1"
    assert s.close() == 0


def test_malformed_json_is_32700_and_the_server_keeps_serving(serve):
    s = serve()
    s.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
    e = s.next_null_error()
    assert e["error"]["code"] == -32700
    s.send_raw(b'{"a": 1, "a": 2}\n')  # duplicate members are refused, not guessed
    assert s.next_null_error(after=1)["error"]["code"] == -32700
    assert s.call("msb.version")["version"]


@pytest.mark.parametrize("raw, why", [
    (b'42', "not an object"),
    (b'"x"', "not an object"),
    (b'{"id": 1, "method": "msb.version"}', "jsonrpc"),
    (b'{"jsonrpc": "1.0", "id": 1, "method": "msb.version"}', "jsonrpc"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": 5}', "method"),
    (b'{"jsonrpc": "2.0", "id": 1}', "method"),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "msb.version"}', "id"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "msb.version", "params": "x"}', "params"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "msb.version", "extra": 1}', "extra"),
])
def test_invalid_requests_are_32600(serve, raw, why):
    s = serve()
    s.send_raw(raw + b"\n")
    r = s.wait_for(lambda m: isinstance(m, dict) and "error" in m)
    assert r["error"]["code"] == -32600 and why in r["error"]["message"]
    assert s.call("msb.version")


def test_an_embedded_nul_is_refused_never_cut_short(fake):
    """(issue 15 finding 8) Every string the server reads is taken with its
    length: "msb.version\\u0000evil" is not msb.version, "2.0\\u0000x" is not
    "2.0", and a parameter or handle name with a NUL is refused, naming it."""
    s = fake
    s.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"msb.version\\u0000evil"}\n')
    e = s.response(1)["error"]
    assert e["code"] == -32600 and "method" in e["message"] and "NUL" in e["message"], e
    s.send_raw(b'{"jsonrpc":"2.0\\u0000x","id":2,"method":"msb.version"}\n')
    e = s.response(2)["error"]
    assert e["code"] == -32600 and "jsonrpc" in e["message"], e
    sb = s.call("router.acquire", router=s.router, key=KEY, spec=SPEC)["sandbox"]
    s.call("sandbox.write_file", sandbox=sb, path="a", data=b64(b"x"))
    e = s.error("sandbox.read_file", {"sandbox": sb, "path": "a\u0000b"})
    assert e["code"] == -32602 and "`path`" in e["message"] and "NUL" in e["message"], e
    e = s.error("sandbox.read_file", {"sandbox": sb + "\u0000", "path": "a"})
    assert e["code"] == -32602 and "`sandbox`" in e["message"] and "NUL" in e["message"], e
    e = s.error("router.acquire", {"router": s.router, "spec": SPEC,
                                   "key": dict(KEY, scope="a\u0000b")})
    assert e["code"] == -32602 and "`scope`" in e["message"], e
    assert s.call("msb.version")["protocol"] == "msb-serve/1"


def test_unknown_method_is_32601_and_a_notification_gets_no_answer(serve):
    s = serve()
    e = s.error("no.such.method")
    assert e["code"] == -32601 and "no.such.method" in e["message"]
    s.send("no.such.method", notify=True)
    s.send("msb.version", notify=True)
    assert s.call("msb.version")
    assert s.close() == 0
    # Two responses only: the error and the last version; notifications got none.
    assert len([m for m in s.lines if m is not None]) == 2


def test_batches(serve):
    s = serve()
    s.send_raw(b"[]\n")
    assert s.next_null_error()["error"]["code"] == -32600
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "msb.version"},
        {"jsonrpc": "2.0", "method": "msb.version"},  # a notification: no entry
        {"jsonrpc": "2.0", "id": "b", "method": "nope"},
        1,
    ]
    s.send_raw(json.dumps(batch).encode() + b"\n")
    out = s.wait_for(lambda m: isinstance(m, list))
    by_id = {m["id"]: m for m in out}
    assert len(out) == 3
    assert "result" in by_id["a"]
    assert by_id["b"]["error"]["code"] == -32601
    assert by_id[None]["error"]["code"] == -32600
    # A batch of notifications only: nothing at all is written for it.
    n = len(s.lines)
    s.send_raw(json.dumps([{"jsonrpc": "2.0", "method": "msb.version"}] * 2).encode() + b"\n")
    assert s.call("msb.version")
    assert not any(isinstance(m, list) for m in s.lines[n:])


def test_oversized_message_is_drained_and_refused(serve):
    s = serve("--max-message", "1024")
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "msb.version",
                      "params": {"pad": "x" * 100000}}).encode()
    s.send_raw(big + b"\n")
    e = s.next_null_error()["error"]
    assert e["code"] == -32600 and "1024" in e["message"]
    assert e["data"]["limit"] == 1024 and e["data"]["received"] >= 100000
    # The rest of the long line was skipped, not parsed as new messages.
    assert s.call("msb.version")
    assert len([m for m in s.lines if m and "error" in m]) == 1


@pytest.mark.parametrize("method, params, phrase", [
    ("msb.version", [1, 2], "named parameters"),
    ("router.new", {}, "`config` is required"),
    ("router.new", {"config": "{}"}, "must be an object"),
    ("router.new", {"config": {}, "bogus": 1}, "no parameter `bogus`"),
    ("router.acquire", {"router": "router-99", "key": KEY, "spec": SPEC}, "no open router"),
    ("sandbox.exec", {"sandbox": 5}, "must be a string"),
])
def test_wrong_params_are_32602(serve, method, params, phrase):
    s = serve()
    e = s.error(method, params)
    assert e["code"] == -32602 and phrase in e["message"], e


def test_wrong_params_on_live_handles(fake):
    s = fake
    sb = s.call("router.acquire", router=s.router, key=KEY, spec=SPEC)["sandbox"]
    cases = [
        ("sandbox.exec", {"sandbox": s.router}, "is a router, not a sandbox"),
        ("sandbox.exec", {"sandbox": sb}, "exactly one of `argv` and `shell`"),
        ("sandbox.exec", {"sandbox": sb, "argv": ["a"], "shell": "b"}, "exactly one"),
        ("sandbox.exec", {"sandbox": sb, "argv": "echo"}, "array of strings"),
        ("sandbox.exec", {"sandbox": sb, "argv": ["a\u0000b"]}, "without NUL"),
        ("sandbox.exec", {"sandbox": sb, "argv": ["a"], "stdin": "!!"}, "not valid base64"),
        ("sandbox.exec", {"sandbox": sb, "argv": ["a"], "timeout": "1"}, "must be a number"),
        ("sandbox.exec_bounded", {"sandbox": sb, "argv": ["a"]}, "`max_output_bytes`"),
        ("sandbox.read_file", {"sandbox": sb, "path": "a", "max_bytes": -1}, "non-negative"),
        ("sandbox.remove", {"sandbox": sb, "path": "a", "recursive": 1}, "true or false"),
        ("router.acquire", {"router": s.router, "key": {"scope": "a"}, "spec": SPEC},
         "`thread_id` is required"),
        ("router.acquire", {"router": s.router, "key": dict(KEY, x=1), "spec": SPEC},
         "no member `x`"),
    ]
    for method, params, phrase in cases:
        e = s.error(method, params)
        assert e["code"] == -32602 and phrase in e["message"], (method, e)
        assert e["data"]["name"] == "ValueError"


# ---- library errors: -32000 with the seed's name and payload ------------------------------------

def test_policy_refusal_carries_the_seed_name_6_10_6_12(serve):
    s = serve()
    r = s.call("router.new", config={
        "min_isolation": "none",
        "backends": [{"type": "declared", "name": "d", "isolation": "container",
                      "declarations": {"egress_modes": ["closed"]}}]})["router"]
    spec = {"kind": "k", "egress": "allowlist", "egress_allow": ["example.com"]}
    e = s.error("router.ensure_can_serve", {"router": r, "spec": spec})
    assert e["code"] == -32000
    assert e["data"]["name"] == "SandboxEgressNotEnforced"
    assert e["data"]["code"] == -1107
    assert "permission" in e["data"]["categories"]  # 6.12: a safety refusal
    assert "cannot enforce the 'allowlist' egress" in e["message"]
    # 6.1: acquire refuses the same way, and records the refusal (17.6).
    e2 = s.error("router.acquire", {"router": r, "key": KEY, "spec": spec})
    assert e2["data"]["name"] == "SandboxEgressNotEnforced"
    ev = s.wait_for(lambda m: m.get("method") == "event")["params"]
    assert ev["event"] == "SandboxAcquired" and ev["refusal"] == "SandboxEgressNotEnforced"


def test_router_construction_refusals(serve):
    s = serve()
    e = s.error("router.new", {"config": {"backends": [{"type": "fake"}]}})
    assert e["data"]["name"] == "SandboxBackendNotPermitted"  # default floor microvm
    e = s.error("router.new", {"config": {"min_isolation": "process"}})
    assert e["data"]["name"] == "ValueError" and "process" in e["message"]  # 1.4
    e = s.error("router.new", {"config": {"backends": [{"type": "nosuch"}]}})
    assert e["data"]["name"] == "ValueError" and "not a backend type" in e["message"]
    e = s.error("router.new", {"config": {"backends": [{"type": "ns", "nope": 1}]}})
    assert e["data"]["name"] == "ValueError" and "nope" in e["message"]
    # A router with no backends is disabled (5.4), and says so.
    r = s.call("router.new", config={})
    assert r["enabled"] is False and r["backends"] == []
    assert r["route"] is None  # only for a given spec
    r2 = s.call("router.new", config={}, spec=SPEC)
    assert r2["route"]["backend"] is None and r2["route"]["error"] == "NoSandboxBackend"
    e = s.error("router.resolve", {"router": r["router"], "spec": SPEC})
    assert e["data"]["name"] == "NoSandboxBackend"
    assert s.call("router.ensure_can_serve", router=r["router"], spec=SPEC) == {}  # 6.14
    e = s.error("router.resolve", {"router": r["router"], "spec": {"kind": "k", "x": 1}})
    assert e["data"]["name"] == "ValueError" and "`x`" in e["message"]


def test_a_spec_refusal_is_prefixed_once(fake):
    """(issue 15 finding 9) The spec's reader names its document; the server
    adds no second "spec: " in front of it."""
    s = fake
    e = s.error("router.resolve", {"router": s.router, "spec": {"kind": "k", "x": 1}})
    assert e["message"] == "spec: unknown key `x`", e
    e = s.error("router.resolve", {"router": s.router, "spec": {"kind": "k\u0000"}})
    assert e["message"].startswith("spec: invalid JSON") and "spec: spec" not in e["message"], e


def test_a_trailing_slash_names_a_directory_never_a_file(fake):
    """(issue 15 finding 9) "a.txt/" is not "a.txt": reading or writing a file
    through a name that ends in a slash is refused; the file is untouched."""
    s = fake
    sb = s.call("router.acquire", router=s.router, key=KEY, spec=SPEC)["sandbox"]
    s.call("sandbox.write_file", sandbox=sb, path="a.txt", data=b64(b"hi"))
    for path in ("a.txt/", "a.txt/."):
        e = s.error("sandbox.read_file", {"sandbox": sb, "path": path})
        assert e["data"]["name"] == "ValueError" and "names a directory" in e["message"], e
        e = s.error("sandbox.write_file", {"sandbox": sb, "path": path, "data": b64(b"no")})
        assert e["data"]["name"] == "ValueError" and "names a directory" in e["message"], e
    assert unb64(s.call("sandbox.read_file", sandbox=sb, path="a.txt")["data"]) == b"hi"


def test_not_implemented_is_typed(fake):
    s = fake
    sb = s.call("router.acquire", router=s.router, key=KEY, spec=SPEC)["sandbox"]
    e = s.error("sandbox.reset", {"sandbox": sb})
    assert e["data"]["name"] == "NotImplementedError" and "not_implemented" in e["data"][
        "categories"]


# ---- every method over the fake ----------------------------------------------------------------

def test_router_new_says_which_backend_and_why(serve):
    """router.new returns the route FIXED selection takes (msb_router_explain):
    the pick, and why each other backend was passed over (issue 16)."""
    s = serve()
    two = {"min_isolation": "none", "selected": "second", "backends": [
        {"type": "declared", "name": "first", "isolation": "container"},
        {"type": "declared", "name": "second", "isolation": "container",
         "declarations": {"egress_modes": ["closed"]}}]}
    r = s.call("router.new", config=two, spec={"kind": "shell"})
    route = r["route"]
    assert route["selection"] == "fixed" and route["backend"] == "second", route
    assert "fixed selection picked 'second' (named by `selected`)" in route["summary"]
    steps = {st["backend"]: st for st in route["steps"]}
    assert steps["second"]["serves"] and steps["second"]["tried"]
    assert not steps["first"]["tried"] and "not tried" in steps["first"]["reason"]
    # For a given spec: the refusal the pick would raise, named.
    spec = {"kind": "k", "egress": "allowlist", "egress_allow": ["example.com"]}
    route = s.call("router.new", config=two, spec=spec)["route"]
    assert route["backend"] is None and route["error"] == "SandboxEgressNotEnforced", route
    assert "cannot enforce the 'allowlist' egress" in steps_of(route)["second"]["reason"]
    e = s.error("router.new", {"config": two, "spec": {"kind": "k", "x": 1}})
    assert e["data"]["name"] == "ValueError" and "`x`" in e["message"], e
    assert s.close() == 0


def steps_of(route):
    return {st["backend"]: st for st in route["steps"]}


def test_router_methods_over_the_fake(fake):
    s = fake
    assert s.call("router.resolve", router=s.router, spec=SPEC) == {
        "backend": "in-process", "isolation": "none", "isolation_scope": "conversation"}
    assert s.call("router.effective_cleanup", router=s.router, spec=SPEC)["cleanup"] in (
        "reclaim", "reset", "dispose")
    a = s.call("router.acquire", router=s.router, key=KEY, spec=SPEC, call="c1")
    assert a["backend"] == "in-process" and a["instance_id"]
    # Acquiring again returns the same physical instance under a new handle.
    b = s.call("router.acquire", router=s.router, key=KEY, spec=SPEC)
    assert b["instance_id"] == a["instance_id"] and b["sandbox"] != a["sandbox"]
    assert s.call("router.key_unclean", router=s.router, key=KEY) == {"unclean": False,
                                                                        "targets": 0}
    assert s.call("router.dispose_kind", router=s.router, key=KEY, kind="shell",
                  timeout=5)["all_landed"] is True
    e = s.error("router.dispose_kind", {"router": s.router, "key": KEY, "kind": "shell",
                                        "timeout": 0})
    assert e["data"]["name"] == "ValueError"
    assert s.call("router.dispose_unclean", router=s.router, key=KEY)["all_landed"] is True
    assert s.call("router.dispose", router=s.router, key=KEY) == {"all_disposed": True}
    purge = s.call("router.dispose_scope", router=s.router, scope="app", thread_id="t1")
    assert sorted(purge) == ["disposed", "undisposed"]
    assert all(isinstance(v, int) and v >= 0 for v in purge.values())
    kinds = [e["event"] for e in s.events()]
    assert "SandboxDisposed" in kinds and "ScopeDisposed" in kinds  # 17.7, 17.8
    acquired = [e for e in s.events() if e["event"] == "SandboxAcquired"]
    assert acquired[0]["call"] == "c1" and acquired[0]["key"]["thread_id"] == "t1"
    assert s.call("sandbox.release", sandbox=a["sandbox"]) == {}
    e = s.error("sandbox.release", {"sandbox": a["sandbox"]})
    assert e["code"] == -32602 and "no open sandbox" in e["message"]
    assert s.call("router.free", router=s.router) == {}
    assert s.error("router.resolve", {"router": s.router, "spec": SPEC})["code"] == -32602
    assert s.close() == 0


def test_events_precede_the_response_that_caused_them_17_6(fake):
    s = fake
    rid = s.send("router.acquire", {"router": s.router, "key": KEY, "spec": SPEC})
    resp = s.response(rid)
    i = s.lines.index(resp)
    assert any(m.get("method") == "event" and m["params"]["event"] == "SandboxAcquired"
               for m in s.lines[:i])


def test_no_events_flag(serve):
    s = serve("--no-events")
    r = s.call("router.new", config=FAKE)["router"]
    s.call("router.acquire", router=r, key=KEY, spec=SPEC)
    assert s.close() == 0
    assert s.events() == []


def test_file_plane_over_the_fake(fake):
    s = fake
    sb = s.call("router.acquire", router=s.router, key=KEY, spec=SPEC)["sandbox"]
    data = bytes(range(256))
    assert s.call("sandbox.write_file", sandbox=sb, path="d.bin", data=b64(data)) == {
        "written": 256}
    r = s.call("sandbox.read_file", sandbox=sb, path="d.bin")
    assert unb64(r["data"]) == data and r["size"] == 256
    assert s.call("sandbox.stat", sandbox=sb, path="d.bin")["entry"]["size_bytes"] == 256
    assert s.call("sandbox.stat", sandbox=sb, path="nope") == {"present": False,
                                                               "entry": None}
    names = [e["path"] for e in s.call("sandbox.list", sandbox=sb)["entries"]]
    assert names == ["d.bin"]
    fp = s.call("sandbox.fingerprint", sandbox=sb)
    assert fp["supported"] and any(p.endswith("d.bin") for p in fp["changed_paths"])
    assert s.call("sandbox.remove", sandbox=sb, path="d.bin") == {}
    assert s.call("sandbox.stat", sandbox=sb, path="d.bin")["present"] is False
    assert s.call("sandbox.reclaim", sandbox=sb, directory="scratch", timeout=5) == {}
    r = s.call("sandbox.run_code", sandbox=sb, code="print(1)")
    assert r["exit_code"] == 0


def test_the_call_session_15_12_15_14_17_14(fake):
    s = fake
    sess = s.call("session.attach", router=s.router, spec=SPEC, name="shell_tool")
    assert sess["name"] == "shell_tool"
    c = s.call("session.begin_call", session=sess["session"], scope="app", thread_id="t7")
    assert len(c["call_id"]) == 12
    assert s.call("call.key", call=c["call"])["key"] == {
        "scope": "app", "thread_id": "t7", "agent_dir": "rpc", "call_id": None}
    path = s.call("call.guest_call_path", call=c["call"])["path"]
    assert path == c["call_id"]
    sb = s.call("call.acquire", call=c["call"])["sandbox"]
    s.call("sandbox.write_file", sandbox=sb, path="x", data=b64(b"1"), working_directory=path)
    r = s.call("call.end", call=c["call"], outcome={"kind": "result", "text": "done"})
    assert r["items"] == [{"text": "done", "guidance": False}]
    # The call's sandbox handle went with it; the call handle too.
    assert s.error("sandbox.stat", {"sandbox": sb, "path": "x"})["code"] == -32602
    assert s.error("call.end", {"call": c["call"]})["code"] == -32602
    ended = [e for e in s.events() if e["event"] == "ToolCallEnded"]
    assert ended and ended[-1]["call"] == c["call_id"] and ended[-1]["outcome"] == "result"

    # No thread context: key and acquire answer with the model-facing sentence (2.5).
    c2 = s.call("session.begin_call", session=sess["session"])
    assert "no active thread context" in s.call("call.key", call=c2["call"])["sentence"]
    assert "no active thread context" in s.call("call.acquire", call=c2["call"])["sentence"]
    e = s.error("call.end", {"call": c2["call"], "outcome": {"kind": "error",
                                                             "error": "NoSuchError"}})
    assert e["code"] == -32602
    e = s.error("call.end", {"call": c2["call"], "outcome": {"kind": "maybe"}})
    assert e["code"] == -32602
    r = s.call("call.end", call=c2["call"], outcome={"kind": "error",
                                                     "error": "SandboxUnclean"})
    assert r["items"] == []
    ended = [e for e in s.events() if e["event"] == "ToolCallEnded"]
    assert ended[-1]["outcome"] == "SandboxUnclean"
    assert s.call("session.detach", session=sess["session"]) == {}
    # A disabled router makes no tool (15.1).
    off = s.call("router.new", config={})["router"]
    assert s.call("session.attach", router=off, spec=SPEC) == {"session": None}


def test_eof_releases_every_handle_and_ends_open_calls(fake):
    s = fake
    sess = s.call("session.attach", router=s.router, spec=SPEC)["session"]
    c = s.call("session.begin_call", session=sess, scope="app", thread_id="t8")
    s.call("call.acquire", call=c["call"])
    s.call("router.acquire", router=s.router, key=KEY, spec=SPEC)
    g = s.call("host_tools.new")["registry"]  # freed too (a leak fails under build-asan)
    s.call("host_tools.register", registry=g, name="x", parameters={"type": "object"})
    assert s.close(timeout=30) == 0
    # The open call was ended as cancelled, which ran its own cleanup.
    ended = [e for e in s.events() if e["event"] == "ToolCallEnded"]
    assert ended and ended[-1]["call"] == c["call_id"] and ended[-1]["outcome"] == "cancelled"


def test_concurrent_requests_interleave(fake):
    s = fake
    ids = [s.send("router.acquire", {"router": s.router, "spec": SPEC,
                                     "key": dict(KEY, thread_id=f"t{i}")}) for i in range(50)]
    got = [s.response(i)["result"]["sandbox"] for i in ids]
    assert len(set(got)) == 50  # every request answered, each with its own handle
    threads = {e["key"]["thread_id"] for e in s.events() if e["event"] == "SandboxAcquired"}
    assert threads == {f"t{i}" for i in range(50)}


# ---- the ns backend ----------------------------------------------------------------------------

# ---- the conformance EXEC suite over serve, against the fake's emulated guest (issue 14) -------

# The fake as router JSON with the emulated POSIX guest and a seeded tree: the
# same backend JSON `msb conformance --config` takes.
GUEST_FAKE = {"type": "fake", "name": "fake", "posix_guest": True, "seed_files": [
    {"path": "/w/notes.txt", "text": "seeded\n"},
    {"path": "/w/blob", "base64": b64(b"\x00\xff")},
    {"path": "/w/sub", "kind": "directory"}]}
WORK = "/maf-sandbox/work"


def exec_suite(s, sb):
    """The EXEC suite's probes (src/core/conformance/conformance_exec.c, 18.6),
    spoken over the wire: {probe: None if it passed, else why it failed}."""
    def run(**kw):
        r = s.response(s.send("sandbox.exec", dict(sandbox=sb, **kw)))
        return r.get("result"), r.get("error")

    s.call("sandbox.write_file", sandbox=sb, path="probe-w/.probe-cwd", data="")
    out = {}
    r, e = run(argv=["printf", "ok-ran"], working_directory="probe-w")
    out["an-argv-sequence-runs"] = (None if r and r["exit_code"] == 0 and
                                    unb64(r["stdout"]) == b"ok-ran" else (r, e))
    r, e = run(shell="exit 7", working_directory="probe-w")
    out["exit-code-fidelity"] = None if r and r["exit_code"] == 7 else (r, e)
    hostile = "a b$(echo injected)c 'q' \"d\" *"
    r, e = run(argv=["printf", "[%s]", hostile], working_directory="probe-w")
    out["argv-is-quoted"] = (None if r and unb64(r["stdout"]) == f"[{hostile}]".encode()
                             else (r, e))
    r, e = run(argv=["pwd"], working_directory="probe-w")
    out["working-directory-is-honoured"] = (
        None if r and unb64(r["stdout"]).rstrip(b"\n") == f"{WORK}/probe-w".encode()
        else (r, e))
    start = time.monotonic()
    r, e = run(argv=["sleep", "30"], working_directory="probe-w", timeout=1.0)
    took = time.monotonic() - start
    out["a-timeout-raises-timeout-error"] = (
        None if e and e["data"]["name"] == "TimeoutError" and 0.5 <= took <= 4.0
        else (r, e, took))
    return out


def test_conformance_exec_suite_over_serve_against_the_fake(serve, write_json):
    s = serve()
    router = s.call("router.new", config={"min_isolation": "none",
                                          "backends": [GUEST_FAKE]})["router"]
    sb = s.call("router.acquire", router=router, key=KEY, spec=SPEC)["sandbox"]
    results = exec_suite(s, sb)
    assert all(v is None for v in results.values()), results
    # The seeds are there from the start, through exec and the file plane.
    r = s.call("sandbox.exec", sandbox=sb, argv=["cat", "notes.txt"], working_directory="/w")
    assert unb64(r["stdout"]) == b"seeded\n"
    assert unb64(s.call("sandbox.read_file", sandbox=sb, path="blob",
                        working_directory="/w")["data"]) == b"\x00\xff"
    r = s.call("sandbox.exec", sandbox=sb, argv=["test", "-d", "/w/sub"])
    assert r["exit_code"] == 0
    s.call("router.dispose", router=router, key=KEY)
    assert s.close() == 0

    # The probes are the suite's: `msb conformance` runs the same ones, and
    # they pass, on the same backend JSON.
    p = subprocess.run([MSB, "conformance", "--config", write_json("fake.json", GUEST_FAKE),
                        "--suite", "exec", "--json"], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    ran = {r["probe"]: r["outcome"] for r in doc["suites"][0]["results"]}
    assert ran == {name: "passed" for name in results}


def test_conformance_over_serve_needs_the_emulated_guest(serve):
    # Without posix_guest the fake runs nothing: the positive control fails,
    # so the suite above cannot pass by accident.
    s = serve()
    plain = {k: v for k, v in GUEST_FAKE.items() if k != "posix_guest"}
    router = s.call("router.new", config={"min_isolation": "none",
                                          "backends": [plain]})["router"]
    sb = s.call("router.acquire", router=router, key=KEY, spec=SPEC)["sandbox"]
    results = exec_suite(s, sb)
    assert results["an-argv-sequence-runs"] is not None
    assert results["a-timeout-raises-timeout-error"] is not None
    # And the fake's JSON is strict like every backend's.
    e = s.error("router.new", {"config": {"backends": [
        {"type": "fake", "seed_files": [{"path": "/w/a", "txt": "x"}]}]}})
    assert "router.backends[0].seed_files[0]: unknown key `txt`" in e["message"], e


@needs_root
def test_exec_over_ns_exact_bytes_9_1_9_6(ns):
    s = ns
    r = s.call("sandbox.exec", sandbox=s.sandbox, argv=["printf", "a b\\377\\000c"])
    assert unb64(r["stdout"]) == b"a b\xff\x00c" and r["exit_code"] == 0
    r = s.call("sandbox.exec", sandbox=s.sandbox, shell="cat; echo $FOO >&2; exit 3",
               stdin=b64(b"in\x00put"), env=["FOO=bar"])
    assert unb64(r["stdout"]) == b"in\x00put" and unb64(r["stderr"]) == b"bar\n"
    assert r["exit_code"] == 3
    r = s.call("sandbox.exec", sandbox=s.sandbox, argv=["sh", "-c", "kill -9 $$"])
    assert r["term_signal"] == 9 and r["exit_code"] == 137
    # env as an object too (issue 16): the spec JSON's own shape
    r = s.call("sandbox.exec", sandbox=s.sandbox, shell='printf "%s|%s" "$FOO" "$E"',
               env={"FOO": "a b=c", "E": ""})
    assert unb64(r["stdout"]) == b"a b=c|"


def test_exec_env_object_refused_like_env_flags(fake):
    """`env` of sandbox.exec as {NAME: VALUE}: the refusals of --env, each
    naming the key, before anything runs (issue 16)."""
    s = fake
    sb = s.call("router.acquire", router=s.router, key=KEY, spec=SPEC)["sandbox"]
    for env, code, name, words in [
            ({"HTTP_PROXY": "http://x"}, -32000, "ValueError", "`HTTP_PROXY` is reserved"),
            ({"PYTHONNOUSERSITE": "0"}, -32000, "ValueError", "`PYTHONNOUSERSITE` is reserved"),
            ({"PYTHONPATH": "rel"}, -32000, "ValueError", "PYTHONPATH entry 1 `rel`"),
            ({"": "x"}, -32000, "ValueError", "has an empty name"),
            ({"N": 1}, -32602, None, "`env.N` must be a string"),
            ({"N": None}, -32602, None, "`env.N` must be a string"),
            ({"A=B": "x"}, -32602, None, "the name `A=B` holds `=`"),
            (["NOEQUALS"], -32000, "ValueError", "is not NAME=VALUE"),
            ("FOO=bar", -32602, None, "must be an object of strings or an array")]:
        for method, extra in (("sandbox.exec", {}),
                              ("sandbox.exec_bounded", {"max_output_bytes": 100})):
            e = s.error(method, {"sandbox": sb, "argv": ["true"], "env": env, **extra})
            assert e["code"] == code and words in e["message"], (env, e)
            if name:
                assert e["data"]["name"] == name, e


@needs_root
def test_exec_bounded_truncates_23_24(ns):
    s = ns
    r = s.call("sandbox.exec_bounded", sandbox=s.sandbox, shell="head -c 100000 /dev/zero",
               max_output_bytes=1000)
    assert r["truncated"] is True and len(unb64(r["stdout"])) <= 1000


@needs_root
def test_timeout_carries_partial_output_9_4(ns):
    s = ns
    e = s.error("sandbox.exec", {"sandbox": s.sandbox, "shell": "echo started; sleep 30",
                                 "timeout": 0.5})
    # The caller's bound expiring is TimeoutError, and only then (9.4).
    assert e["data"]["name"] == "TimeoutError"
    assert "timeout" in e["data"]["categories"]
    assert unb64(e["data"]["payload"]["output"]).startswith(b"started")
    assert e["data"]["payload"]["signal"]


@needs_root
def test_file_plane_over_ns_9_23(ns):
    s = ns
    data = os.urandom(200000)
    s.call("sandbox.write_file", sandbox=s.sandbox, path="dir/blob", data=b64(data))
    assert unb64(s.call("sandbox.read_file", sandbox=s.sandbox, path="dir/blob")["data"]) == data
    e = s.error("sandbox.read_file", {"sandbox": s.sandbox, "path": "dir/blob",
                                      "max_bytes": 1000})
    assert e["data"]["name"] == "SandboxTransferCapExceeded"
    assert e["data"]["payload"]["cap"] == "max_bytes_per_file"
    e = s.error("sandbox.read_file", {"sandbox": s.sandbox, "path": "nope"})
    assert e["data"]["name"] == "FileNotFoundError"
    e = s.error("sandbox.read_file", {"sandbox": s.sandbox, "path": "../../etc/passwd"})
    assert e["code"] == -32000 and e["data"]["name"] != "MsbError"
    ls = s.call("sandbox.list", sandbox=s.sandbox, path="dir")["entries"]
    assert ls == [{"path": "dir/blob", "kind": "file", "size_known": True,
                   "size_bytes": 200000}]
    s.call("sandbox.remove", sandbox=s.sandbox, path="dir", recursive=True)
    assert s.call("sandbox.stat", sandbox=s.sandbox, path="dir")["present"] is False


@needs_root
def test_concurrent_execs_answer_out_of_order(ns):
    s = ns
    slow = s.send("sandbox.exec", {"sandbox": s.sandbox, "shell": "sleep 1.5; echo slow"})
    fast = [s.send("sandbox.exec", {"sandbox": s.sandbox, "argv": ["echo", str(i)]})
            for i in range(6)]
    for i, rid in enumerate(fast):
        assert unb64(s.response(rid)["result"]["stdout"]) == f"{i}\n".encode()
    with s.cond:
        slow_done = any(isinstance(m, dict) and m.get("id") == slow for m in s.lines)
    assert not slow_done  # the fast ones overtook it
    assert unb64(s.response(slow)["result"]["stdout"]) == b"slow\n"


@needs_root
def test_ns_floor_refusal_and_eof_leaves_the_conversation_sandbox(serve, state, msb):
    s = serve()
    e = s.error("router.new", {"config": ns_config(state, floor="microvm")})
    assert e["data"]["name"] == "SandboxBackendNotPermitted"
    r = s.call("router.new", config=ns_config(state))["router"]
    inst = s.call("router.acquire", router=r, key=KEY, spec=SPEC)["instance_id"]
    assert s.close() == 0
    # EOF released the handles and disposed nothing: the conversation's
    # sandbox is still there for the next process (the shutdown rule).
    p = msb("ls", "--state-dir", state, "--json")
    assert inst.encode() in p.stdout or b"t1" in p.stdout
    p = msb("dispose", "--state-dir", state, "--scope", "app", "--thread", "t1", "--agent",
            "agent")
    assert p.returncode == 0, p.stderr


@needs_root
def test_guest_bytes_that_are_not_utf8_are_replaced_not_dropped(ns):
    s = ns
    s.call("sandbox.exec", sandbox=s.sandbox, shell="touch \"$(printf 'bad\\377name')\"")
    entries = s.call("sandbox.list", sandbox=s.sandbox)["entries"]
    assert [e["path"] for e in entries] == ["bad\ufffdname"]
    fp = s.call("sandbox.fingerprint", sandbox=s.sandbox)
    assert any("bad\ufffdname" in p for p in fp["changed_paths"]) or not fp["supported"]


@needs_root
def test_call_end_waits_for_requests_on_the_calls_sandbox(serve, state):
    s = serve()
    r = s.call("router.new", config=ns_config(state))["router"]
    sess = s.call("session.attach", router=r, spec=SPEC)["session"]
    c = s.call("session.begin_call", session=sess, scope="app", thread_id="t5")
    sb = s.call("call.acquire", call=c["call"])["sandbox"]
    running = s.send("sandbox.exec", {"sandbox": sb, "shell": "sleep 1; echo done"})
    time.sleep(0.3)
    end = s.send("call.end", {"call": c["call"], "outcome": {"kind": "result", "text": "x"}})
    # The exec finishes on a live sandbox; the end comes after it, then cleans up.
    assert unb64(s.response(running)["result"]["stdout"]) == b"done\n"
    assert s.response(end)["result"]["items"] == [{"text": "x", "guidance": False}]
    ordered = [m.get("id") for m in s.lines if isinstance(m, dict) and "id" in m]
    assert ordered.index(running) < ordered.index(end)
    s.call("router.dispose_scope", router=r, scope="app", thread_id="t5")
    assert s.close() == 0


def test_options_purge_properties_and_report_unclean_7_14_8_8(serve):
    s = serve()
    r = s.call("router.new", config=dict(FAKE, min_cleanup="reclaim"))["router"]
    opts = s.call("router.options", router=r)
    assert opts["min_isolation"] == "none" and opts["min_cleanup"] == "reclaim"
    assert opts["reclaim"] == {"timeout": 30.0, "failed_reclaim_policy": "dispose"}
    purge = s.call("router.purge_scoped_thread", router=r, scope="app", thread_id="t1")
    assert sorted(purge) == ["disposed", "undisposed"]
    assert any(e["event"] == "ScopeDisposed" for e in s.events())  # 7.14
    sess = s.call("session.attach", router=r, spec=SPEC)["session"]
    assert s.call("session.properties", session=sess) == {"source_integrity": "trusted"}
    c1 = s.call("session.begin_call", session=sess, scope="app", thread_id="t1")
    c2 = s.call("session.begin_call", session=sess, scope="app", thread_id="t1")
    sb1 = s.call("call.acquire", call=c1["call"])["sandbox"]
    e = s.error("call.report_unclean", {"call": c2["call"], "sandbox": sb1, "reason": "x"})
    assert e["code"] == -32602 and "not acquired by this call" in e["message"]
    assert s.call("call.report_unclean", call=c1["call"], sandbox=sb1,
                  reason="a survivor") == {}
    e = s.error("call.end", {"call": c2["call"]})  # a result needs its text
    assert e["data"]["name"] == "ValueError" and "no text" in e["message"]
    n = len(s.events())
    s.call("call.end", call=c1["call"], outcome={"kind": "result", "text": "ok"})
    # 8.8: the unclean instance reaches the unclean policy (dispose), though the
    # rung was reclaim.
    disposed = [e for e in s.events()[n:] if e["event"] == "SandboxDisposed"]
    assert disposed and disposed[0]["origin"] == "framework"


def test_every_method_is_served_and_documented():
    import re
    from conftest import ROOT
    with open(os.path.join(ROOT, "cli", "rpc", "methods.c")) as f:
        table = set(re.findall(r'^\s+\{"([a-z_.]+)",', f.read(), re.M))
    with open(os.path.join(ROOT, "docs", "serve.md")) as f:
        documented = set(re.findall(r"^### `([a-z_.]+)`", f.read(), re.M))
    assert len(table) >= 35 and table == documented
    s = Serve()
    for m in sorted(table):
        e = s.response(s.send(m, {"no_such_parameter": 1}))
        assert e["error"]["code"] == -32602, (m, e)  # known, and strict about its params
    assert s.close() == 0


def test_garbage_never_stops_the_server(serve):
    """Random bytes, random JSON and truncated requests: every line is answered or
    ignored, none kills the server (the wire is untrusted input)."""
    import random
    rnd = random.Random(1234)
    s = serve("--max-message", "4096")
    valid = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "router.new",
                        "params": {"config": FAKE}}).encode()
    pieces = [b"{", b"}", b"[", b"]", b'"', b":", b",", b"null", b"1e999", b"\\u0000",
              b'"jsonrpc"', b'"2.0"', b'"id"', b'"method"', b'"params"', b"\xff", b"\x00"]
    for _ in range(400):
        kind = rnd.randrange(3)
        if kind == 0:
            line = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 200)))
        elif kind == 1:
            line = b"".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 30)))
        else:
            line = valid[:rnd.randrange(len(valid))]
        s.send_raw(line.replace(b"\n", b" ") + b"\n")
    s.send_raw(b"x" * 10000 + b"\n")
    assert s.call("msb.version")["version"]
    assert s.close() == 0


def test_crlf_and_a_last_line_without_newline(serve):
    s = serve()
    s.send_raw(b'{"jsonrpc":"2.0","id":"crlf","method":"msb.version"}\r\n')
    assert "result" in s.response("crlf")
    s.send_raw(b'{"jsonrpc":"2.0","id":"last","method":"msb.version"}')
    s.p.stdin.close()
    assert s.p.wait(30) == 0
    assert "result" in s.response("last")


@needs_root
def test_reset_and_fingerprint_over_ns_18_12(ns):
    s = ns
    s.call("sandbox.write_file", sandbox=s.sandbox, path="scratch.txt", data=b64(b"x"))
    fp = s.call("sandbox.fingerprint", sandbox=s.sandbox)
    assert fp["supported"] and any(p.endswith("scratch.txt") for p in fp["changed_paths"])
    assert s.call("sandbox.reset", sandbox=s.sandbox, timeout=30) == {}
    assert s.call("sandbox.stat", sandbox=s.sandbox, path="scratch.txt")["present"] is False
    fp = s.call("sandbox.fingerprint", sandbox=s.sandbox)
    assert not any(p.endswith("scratch.txt") for p in fp["changed_paths"])


def vm_hwm(pid):
    """Peak resident set of a process, in bytes (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


# Under argv[1]: a chain of argv[2] directories of argv[4] letters, and in the
# last one argv[3] files named with argv[5] characters (relative names).
PLANT = """import os, sys
where, depth, files, dlen, flen = sys.argv[1], *map(int, sys.argv[2:6])
os.chdir(where)
for _ in range(depth):
    os.mkdir('d' * dlen)
    os.chdir('d' * dlen)
for i in range(files):
    os.close(os.open(str(i).rjust(flen, 'f'), os.O_CREAT | os.O_WRONLY, 0o644))
"""


@needs_root
def test_fingerprint_bomb_is_a_typed_error_not_a_huge_line(ns):
    """Issue 15 finding 4: long guest paths made serve write a 570 MB line.
    ~20 MB of paths in 5,000 entries: refused under the 16 MiB byte budget,
    in a line of a few hundred bytes, with serve's peak barely moved."""
    s = ns
    r = s.call("sandbox.exec", sandbox=s.sandbox, timeout=300,
               argv=["python3", "-c", PLANT, "/tmp", "15", "5000", "250", "200"])
    assert r["exit_code"] == 0, unb64(r["stderr"])
    before = vm_hwm(s.p.pid)
    resp = s.response(s.send("sandbox.fingerprint", {"sandbox": s.sandbox}))
    grew = vm_hwm(s.p.pid) - before
    assert "error" in resp, f"a {len(json.dumps(resp))}-byte result"
    data = resp["error"]["data"]
    assert data["name"] == "RuntimeError" and "runtime" in data["categories"]
    assert "cannot attest: more than 16777216 bytes of changed paths" in data["message"]
    assert len(json.dumps(resp)) < 4096
    assert grew < 32 << 20, f"serve's peak grew by {grew} bytes"


# ---- collect_outputs (checklist 12) -------------------------------------------------------------

OUT_SPEC = {"kind": "report", "declared_outputs": [
    {"path": "out/a.txt", "media_type": "text/plain"},
    {"path": "b.bin", "required": False}]}


def test_collect_outputs_lands_and_refuses_12_1_12_26(fake, tmp_path):
    import hashlib
    s = fake
    sb = s.call("router.acquire", router=s.router, key=KEY, spec=OUT_SPEC)["sandbox"]
    s.call("sandbox.write_file", sandbox=sb, path="out/a.txt", data=b64(b"hello"))
    sink = {"directory": str(tmp_path)}
    n = len(s.events())
    got = s.call("sandbox.collect_outputs", sandbox=sb, spec=OUT_SPEC, sink=sink,
                 call_id="c1", key=KEY)["artifacts"]
    # The optional absent one is skipped; the present one landed with its digest.
    assert [a["name"] for a in got] == ["out/a.txt"]
    a = got[0]
    assert a["media_type"] == "text/plain" and a["size_bytes"] == 5
    assert a["sha256"] == hashlib.sha256(b"hello").hexdigest()
    assert a["handle"] == str(tmp_path / "out" / "a.txt") and str(tmp_path) not in a["display"]
    assert (tmp_path / "out" / "a.txt").read_bytes() == b"hello"
    ev = [e for e in s.events()[n:] if e["event"] == "OutputsCollected"]
    assert ev and ev[-1]["call"] == "c1"
    # 12.27: an existing destination is refused by default, replaced when asked.
    e = s.error("sandbox.collect_outputs", {"sandbox": sb, "spec": OUT_SPEC, "sink": sink})
    assert e["code"] == -32000 and e["data"]["name"] == "SandboxLandingExists"
    s.call("sandbox.write_file", sandbox=sb, path="out/a.txt", data=b64(b"HELLO"))
    s.call("sandbox.collect_outputs", sandbox=sb, spec=OUT_SPEC,
           sink=dict(sink, existing="replace"))
    assert (tmp_path / "out" / "a.txt").read_bytes() == b"HELLO"
    # 12.30: landing outputs and no sink.
    e = s.error("sandbox.collect_outputs", {"sandbox": sb, "spec": OUT_SPEC})
    assert e["data"]["name"] == "SandboxOutputSinkRequired"
    # 12.12: the cap and the file in the payload; nothing lands.
    capped = dict(OUT_SPEC, files_out={"max_bytes_per_file": 2})
    (tmp_path / "x").mkdir()
    e = s.error("sandbox.collect_outputs", {"sandbox": sb, "spec": capped,
                                             "sink": {"directory": str(tmp_path / "x")}})
    assert e["data"]["name"] == "SandboxTransferCapExceeded"
    assert e["data"]["payload"]["cap"] == "max_bytes_per_file"
    assert e["data"]["payload"]["file"] == "out/a.txt"
    assert not os.listdir(tmp_path / "x")
    # A required output that is absent.
    missing = {"kind": "report", "declared_outputs": [{"path": "nope.txt"}]}
    e = s.error("sandbox.collect_outputs", {"sandbox": sb, "spec": missing, "sink": sink})
    assert e["data"]["name"] == "SandboxOutputMissing"
    # 12.8: two landing names that differ only in case.
    clash = {"kind": "report", "declared_outputs": [{"path": "A.txt"}, {"path": "a.txt"}]}
    e = s.error("sandbox.collect_outputs", {"sandbox": sb, "spec": clash, "sink": sink})
    assert e["data"]["name"] == "SandboxArtifactNameCollision"
    # 12.28: a link below the sink's root is not followed.
    os.symlink("/tmp", tmp_path / "link")
    linked = {"kind": "report", "declared_outputs": [{"path": "out/a.txt", "name": "link/a"}]}
    e = s.error("sandbox.collect_outputs", {"sandbox": sb, "spec": linked, "sink": sink})
    assert e["data"]["name"] == "SandboxLandingNotConfined" and "/tmp" not in e["message"]


def test_collect_outputs_call_time_outputs_12_3_12_4(fake, tmp_path):
    s = fake
    spec = {"kind": "report"}
    sb = s.call("router.acquire", router=s.router, key=KEY, spec=spec)["sandbox"]
    s.call("sandbox.write_file", sandbox=sb, path="late.txt", data=b64(b"x"))
    outs = [{"path": "late.txt", "media_type": "text/plain"}]
    sink = {"directory": str(tmp_path)}
    # 12.3: refused unless the spec allows outputs named at call time.
    e = s.error("sandbox.collect_outputs", {"sandbox": sb, "spec": spec, "outputs": outs,
                                             "sink": sink})
    assert e["data"]["name"] == "ValueError" and "call time" in e["message"]
    assert not (tmp_path / "late.txt").exists()
    allowed = dict(spec, outputs_named_at_call_time=True)
    got = s.call("sandbox.collect_outputs", sandbox=sb, spec=allowed, outputs=outs,
                 sink=sink)["artifacts"]
    assert [a["name"] for a in got] == ["late.txt"]
    # The spec's own reader checks each call-time output.
    e = s.error("sandbox.collect_outputs", {"sandbox": sb, "spec": allowed,
                                             "outputs": [{"media_type": "x"}], "sink": sink})
    assert e["code"] == -32602 and "path" in e["message"]
    for bad in [{"sandbox": sb, "spec": spec, "sink": "dir"},
                {"sandbox": sb, "spec": spec, "sink": {"directory": str(tmp_path), "x": 1}},
                {"sandbox": sb, "spec": spec, "sink": {"directory": str(tmp_path),
                                                        "existing": "merge"}},
                {"sandbox": sb, "spec": spec, "outputs": {"path": "a"}}]:
        assert s.error("sandbox.collect_outputs", bad)["code"] == -32602, bad


# ---- host tools (checklist 13, 14) ---------------------------------------------------------------

ADD_SCHEMA = {"type": "object", "properties": {"left": {"type": "integer"},
                                               "right": {"type": "integer"}},
              "required": ["left", "right"]}
PURE = {"source": None, "sink": None, "identity": None}


def answer(s, bodies):
    """Answer the server's host_tool.call requests with Python functions."""
    def on_request(msg):
        assert msg["method"] == "host_tool.call" and isinstance(msg["id"], str)
        p = msg["params"]
        try:
            reply = {"result": bodies[p["tool"]](**p["arguments"])}
        except Exception as e:  # the tool's failure
            reply = {"error": {"code": -32000, "message": str(e)}}
        if reply.get("result", 0) is Ellipsis:
            return  # never answer
        s.send_raw(json.dumps({"jsonrpc": "2.0", "id": msg["id"], **reply}).encode() + b"\n")
    s.on_request = on_request


def test_host_tool_registry_methods_13_6_13_10(fake):
    s = fake
    g = s.call("host_tools.new", require_declared=True, max_calls_per_run=4)["registry"]
    assert s.call("host_tools.register", registry=g, name="add", parameters=ADD_SCHEMA,
                  declaration=PURE, description="adds") == {"names": ["add"]}
    e = s.error("host_tools.register", {"registry": g, "name": "add", "declaration": PURE})
    assert e["data"]["name"] == "ValueError" and "never replaced" in e["message"]
    e = s.error("host_tools.register", {"registry": g, "name": "bare"})
    assert e["data"]["name"] == "HostToolNotDeclared"
    e = s.error("host_tools.register", {"registry": g, "name": "u", "declaration":
                                        {"source": None, "sink": None, "identity": "user"}})
    assert e["data"]["name"] == "HostToolIdentityNotAllowed"
    e = s.error("host_tools.register", {"registry": g, "name": "s", "declaration": PURE,
                                        "parameters": {"type": "object", "pattern": "x"}})
    assert e["data"]["name"] == "ValueError" and "pattern" in e["message"]
    e = s.error("host_tools.register", {"registry": g, "name": "d",
                                        "declaration": {"source": "semi"}})
    assert e["code"] == -32000 and e["data"]["name"] == "ValueError"
    agg = s.call("host_tools.aggregate", registry=g)
    assert agg["names"] == ["add"] and agg["identities"] == [] and not agg["has_undeclared"]
    e = s.error("host_tools.register", {"registry": g, "name": "late", "declaration": PURE})
    assert "sealed" in e["message"]
    # 13.9: option validation; a wrong handle kind; the bound on waiting for the client.
    assert s.error("host_tools.new", {"max_calls_per_run": 0})["data"]["name"] == "ValueError"
    assert s.error("host_tools.new", {"call_timeout": 0})["code"] == -32602
    assert s.error("host_tools.new", {"allowed_identities": ["root"]})["code"] == -32602
    assert s.error("host_tools.new", {"response_limits": {"max_files": -1}})["code"] == -32602
    assert s.error("host_tools.new", {"response_limits": {"nope": 1}})["code"] == -32602
    e = s.error("host_tools.new", {"response_limits": {"max_files": 0}})
    assert e["data"]["name"] == "ValueError"
    e = s.error("host_tools.register", {"registry": s.router, "name": "x"})
    assert e["code"] == -32602 and "not a registry" in e["message"]
    sb = s.call("router.acquire", router=s.router, key=KEY, spec=SPEC)["sandbox"]
    e = s.error("sandbox.run_with_host_tools", {"sandbox": sb, "registry": g,
                                                 "program": "print(1)", "transport": "ssh"})
    assert e["code"] == -32602
    # The native channel is ns's; the fake refuses it with a reason.
    e = s.error("sandbox.run_with_host_tools", {"sandbox": sb, "registry": g,
                                                 "program": "print(1)", "transport": "native"})
    assert e["data"]["name"] == "ValueError" and "not an ns sandbox" in e["message"]
    assert s.call("host_tools.free", registry=g) == {}
    assert s.error("host_tools.aggregate", {"registry": g})["code"] == -32602


def test_a_late_or_stray_response_is_never_answered(serve):
    s = serve()
    s.send_raw(b'{"jsonrpc":"2.0","id":"msb-99","result":1}\n')
    s.send_raw(b'{"jsonrpc":"2.0","id":"msb-98","error":{"code":1,"message":"x"}}\n')
    assert s.call("msb.version")["version"]
    assert s.close() == 0
    assert not [m for m in s.lines if isinstance(m, dict) and m.get("id") in ("msb-99", "msb-98")]


HOST_PROGRAMS = {
    "exec": "import maf_host_tools as t\n",
    "native": "import msb_host_tools as t\n",
}
PROGRAM_BODY = """
print("sum", t.call("add", left=2, right=3))
for args in [dict(left="two", right=3), dict(left=1)]:
    try:
        t.call("add", **args)
    except t.HostToolError as e:
        print("refused", e)
try:
    t.call("boom")
except t.HostToolError as e:
    print("failed", e)
try:
    t.call("nope")
except t.HostToolError as e:
    print("unknown", e)
"""


@needs_root
@pytest.mark.parametrize("transport", ["exec", "native"])
def test_guest_calls_a_host_tool_the_client_answers_13_18_14_1(ns, transport):
    s = ns
    g = s.call("host_tools.new", max_calls_per_run=8)["registry"]
    s.call("host_tools.register", registry=g, name="add", parameters=ADD_SCHEMA,
           declaration=PURE)
    s.call("host_tools.register", registry=g, name="boom", declaration=PURE)
    seen = []

    def add(left, right):
        seen.append((left, right))
        return left + right

    def boom():
        raise RuntimeError("the client's secret reason")
    answer(s, {"add": add, "boom": boom})
    n = len(s.events())
    r = s.call("sandbox.run_with_host_tools", sandbox=s.sandbox, registry=g,
               transport=transport, program=HOST_PROGRAMS[transport] + PROGRAM_BODY,
               timeout=60, poll_interval=0.02)
    out = unb64(r["stdout"]).decode()
    assert r["exit_code"] == 0, out + unb64(r["stderr"]).decode()
    assert "sum 5" in out
    # Only the valid call reached the client: the schema gate is the library's.
    assert seen == [(2, 3)]
    refused = [l for l in out.splitlines() if l.startswith("refused")]
    assert len(refused) == 2 and all("arguments do not bind to host tool 'add'" in l
                                     for l in refused)
    assert "host tool 'boom' failed" in out and "secret" not in out
    assert "is not a registered host tool" in out
    assert r["calls"] == 5 and r["delivered"] == 1
    called = [e for e in s.events()[n:] if e["event"] == "HostToolCalled"]
    assert len(called) == 5


@needs_root
def test_a_client_that_never_answers_is_bounded_per_call(ns):
    s = ns
    g = s.call("host_tools.new", call_timeout=1)["registry"]
    s.call("host_tools.register", registry=g, name="slow", declaration=PURE)
    answer(s, {"slow": lambda: Ellipsis})
    t0 = time.monotonic()
    r = s.call("sandbox.run_with_host_tools", sandbox=s.sandbox, registry=g,
               transport="native", timeout=60, program=HOST_PROGRAMS["native"] + """
try:
    t.call("slow")
except t.HostToolError as e:
    print("failed", e)
""")
    assert time.monotonic() - t0 < 30
    assert "host tool 'slow' failed" in unb64(r["stdout"]).decode()


@needs_root
def test_call_cap_and_concurrent_runs_with_their_own_counters_13_17_13_20(ns):
    """Two runs at once on one registry: each has fresh counters, so each gets
    the cap; the third call of each is refused with the seed's sentence."""
    s = ns
    g = s.call("host_tools.new", max_calls_per_run=4,
               response_limits={"max_files": 2})["registry"]
    s.call("host_tools.register", registry=g, name="echo", declaration=PURE,
           parameters={"type": "object", "properties": {"v": {"type": "string"}}})
    answer(s, {"echo": lambda v: v})
    body = """
import sys
for i in range(5):
    try:
        print("got", t.call("echo", v=sys.argv[0] + str(i)))
    except t.HostToolError as e:
        print("refused", e)
"""
    # One run over each transport, at once (the native socket is one per sandbox).
    ids = [s.send("sandbox.run_with_host_tools",
                  {"sandbox": s.sandbox, "registry": g, "transport": tr, "timeout": 60,
                   "poll_interval": 0.02, "program": HOST_PROGRAMS[tr] + body,
                   "program_name": f"p{n}.py", "run_directory": f"runs/r{n}"})
           for n, tr in enumerate(["native", "exec"])]
    for n, rid in enumerate(ids):
        resp = s.response(rid)
        assert "result" in resp, resp
        r = resp["result"]
        out = unb64(r["stdout"]).decode()
        assert out.count("got") == 2 and f"p{n}.py0" in out, out
        # Two delivered, then the response cap, then the call cap (refusals count).
        assert out.count("delivered-response cap (2) is exhausted") == 2, out
        assert out.count("host-tool-call cap (4) is exhausted") == 1, out
        assert r["calls"] == 5 and r["delivered"] == 2
    # A second native run while one holds the sandbox's socket is refused, typed:
    # the first run's tool body (here, while the first is surely running) tries it.
    seen = []

    def gate():
        seen.append(s.error("sandbox.run_with_host_tools", {
            "sandbox": s.sandbox, "registry": g, "transport": "native", "program": "pass"}))
        return "open"
    answer(s, {"echo": lambda v: v, "gate": gate})
    g = s.call("host_tools.new")["registry"]
    s.call("host_tools.register", registry=g, name="gate", declaration=PURE)
    r = s.call("sandbox.run_with_host_tools", sandbox=s.sandbox, registry=g, transport="native",
               program=HOST_PROGRAMS["native"] + "print(t.call('gate'))\n")
    assert unb64(r["stdout"]) == b"open\n"
    assert seen[0]["data"]["name"] == "OSError" and "another run" in seen[0]["message"], seen


@needs_root
def test_a_call_waiting_when_stdin_closes_fails_at_once(serve, state):
    s = serve()
    r = s.call("router.new", config=ns_config(state))["router"]
    sb = s.call("router.acquire", router=r, key=KEY, spec=SPEC)["sandbox"]
    g = s.call("host_tools.new", call_timeout=600)["registry"]
    s.call("host_tools.register", registry=g, name="wait", declaration=PURE)
    closed = threading.Event()

    def on_request(msg):
        s.p.stdin.close()  # the client goes away instead of answering
        closed.set()
    s.on_request = on_request
    t0 = time.monotonic()
    rid = s.send("sandbox.run_with_host_tools", {
        "sandbox": sb, "registry": g, "transport": "native", "timeout": 120,
        "program": HOST_PROGRAMS["native"] + """
try:
    t.call("wait")
except t.HostToolError as e:
    print("failed", e)
"""})
    assert closed.wait(60)
    # The pending call failed without waiting out its 600 s; the run finished,
    # was answered, and the server exited once every request was done.
    assert s.p.wait(120) == 0
    assert time.monotonic() - t0 < 120
    res = s.response(rid)["result"]
    assert "host tool 'wait' failed" in unb64(res["stdout"]).decode()
    s.t_err.join(30)
    assert b"closed the connection" in s.stderr
    # The sandbox stays (the shutdown rule disposes nothing): dispose it.
    s2 = serve()
    r2 = s2.call("router.new", config=ns_config(state))["router"]
    s2.call("router.dispose", router=r2, key=KEY)
    assert s2.close() == 0


@needs_root
def test_program_timeout_over_exec_carries_output_14_25(ns):
    s = ns
    g = s.call("host_tools.new")["registry"]
    e = s.error("sandbox.run_with_host_tools", {
        "sandbox": s.sandbox, "registry": g, "transport": "exec", "timeout": 1,
        "poll_interval": 0.05,
        "program": "import time\nprint('started', flush=True)\ntime.sleep(60)\n"})
    assert e["data"]["name"] == "SandboxProgramTimeout"
    assert "timeout" in e["data"]["categories"]
    assert b"started" in unb64(e["data"]["payload"]["output"])
    assert e["data"]["payload"]["signal"] in ("sent", "refused", "absent", "unknown")


@needs_root
def test_responses_to_the_server_may_come_in_a_batch(ns):
    s = ns
    g = s.call("host_tools.new")["registry"]
    s.call("host_tools.register", registry=g, name="one", declaration=PURE)

    def on_request(msg):
        s.send_raw(json.dumps([{"jsonrpc": "2.0", "id": "msb-0", "result": "stray"},
                               {"jsonrpc": "2.0", "id": msg["id"], "result": 1}]).encode()
                   + b"\n")
    s.on_request = on_request
    r = s.call("sandbox.run_with_host_tools", sandbox=s.sandbox, registry=g, transport="native",
               program=HOST_PROGRAMS["native"] + "print(t.call('one'))\n")
    assert unb64(r["stdout"]) == b"1\n"


def test_a_sessions_sink_is_its_calls_default_12_22_15_4(serve, tmp_path):
    s = serve()
    r = s.call("router.new", config={"min_isolation": "none", "backends": [
        {"type": "fake", "declarations": {
            "capabilities": ["exec", "files_in", "files_out", "files_list", "reclaim"],
            "egress_modes": ["closed"]}}]})["router"]
    spec = {"kind": "report", "requires": ["exec", "files_in", "files_out"],
            "declared_outputs": [{"path": "r.txt"}]}
    # A spec that lands artifacts needs the tool's sink.
    e = s.error("session.attach", {"router": r, "spec": spec})
    assert e["data"]["name"] == "SandboxOutputSinkRequired"
    e = s.error("session.attach", {"router": r, "spec": spec,
                                   "sink": {"directory": str(tmp_path / "absent")}})
    assert e["code"] == -32000 and e["data"]["name"] == "FileNotFoundError"
    sess = s.call("session.attach", router=r, spec=spec,
                  sink={"directory": str(tmp_path)})["session"]
    c = s.call("session.begin_call", session=sess, scope="app", thread_id="t9")
    sb = s.call("call.acquire", call=c["call"])["sandbox"]
    s.call("sandbox.write_file", sandbox=sb, path="r.txt", data=b64(b"ok"))
    n = len(s.events())
    got = s.call("sandbox.collect_outputs", sandbox=sb, spec=spec)["artifacts"]
    assert got[0]["handle"] == str(tmp_path / "r.txt") and (tmp_path / "r.txt").read_bytes() == b"ok"
    ev = [x for x in s.events()[n:] if x["event"] == "OutputsCollected"]
    assert ev and ev[-1]["call"] == c["call_id"]
    s.call("call.end", call=c["call"], outcome={"kind": "result", "text": "done"})
    s.call("session.detach", session=sess)
    s.call("router.dispose_scope", router=r, scope="app", thread_id="t9")
    assert s.close() == 0


@needs_root
def test_an_ns_backend_keeps_the_front_ends_pool_unless_it_names_one(serve, state):
    """`msb serve` writes pool_size 2 into each ns backend of a client's
    router that names none (docs/pool.md): its first acquire leaves two
    pooled sandboxes starting; a backend naming pool_size 0 keeps none."""
    def pooled():
        p = subprocess.run([MSB, "pool", "ls", "--json", "--state-dir", state],
                           capture_output=True, env=dict(os.environ, MSB_CONFIG=""))
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    s = serve()
    off = {"min_isolation": "container",
           "backends": [{"type": "ns", "state_dir": state, "pool_size": 0}]}
    r = s.call("router.new", config=off)["router"]
    s.call("router.acquire", router=r, key=KEY, spec=SPEC)
    s.call("router.dispose", router=r, key=KEY)
    assert pooled() == []
    r = s.call("router.new", config=ns_config(state))["router"]
    s.call("router.acquire", router=r, key=KEY, spec=SPEC)
    s.call("router.dispose", router=r, key=KEY)
    assert s.close() == 0  # the refill's shims were started before it exits
    assert len(pooled()) == 2
