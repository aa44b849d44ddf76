"""A stdlib-only client of ``msb serve`` (docs/serve.md).

The client starts ``msb serve`` as a child process and speaks JSON-RPC 2.0 to
it, one line per message. Calls are thread-safe and may run concurrently: a
reader thread matches responses to requests by id. Observer events arrive as
notifications and are kept in ``Client.events`` (and passed to ``on_event``).
"""
import base64
import itertools
import json
import os
import shutil
import subprocess
import threading

from .errors import InvalidParams, ServerGone, error_from_response


def _b64(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode("ascii")


def _unb64(text):
    return base64.b64decode(text.encode("ascii"), validate=True)


def find_msb():
    """$MSB_BIN, else $MSB_BUILD/cli/msb, else `msb` on PATH."""
    if os.environ.get("MSB_BIN"):
        return os.environ["MSB_BIN"]
    if os.environ.get("MSB_BUILD"):
        return os.path.join(os.environ["MSB_BUILD"], "cli", "msb")
    found = shutil.which("msb")
    if not found:
        raise FileNotFoundError("msb not found: set MSB_BIN or put msb on PATH")
    return found


class Key:
    """SandboxKey: (scope, thread_id, agent_dir[, call_id])."""

    __slots__ = ("scope", "thread_id", "agent_dir", "call_id")

    def __init__(self, scope, thread_id, agent_dir, call_id=None):
        self.scope, self.thread_id, self.agent_dir, self.call_id = (
            scope, thread_id, agent_dir, call_id)

    def to_json(self):
        d = {"scope": self.scope, "thread_id": self.thread_id, "agent_dir": self.agent_dir}
        if self.call_id is not None:
            d["call_id"] = self.call_id
        return d

    @classmethod
    def from_json(cls, d):
        return cls(d["scope"], d["thread_id"], d["agent_dir"], d.get("call_id"))

    def __eq__(self, other):
        return isinstance(other, Key) and self.to_json() == other.to_json()

    def __hash__(self):
        return hash(tuple(self.to_json().items()))

    def __repr__(self):
        return f"Key({self.scope!r}, {self.thread_id!r}, {self.agent_dir!r}, {self.call_id!r})"


def _key(key):
    if isinstance(key, Key):
        return key.to_json()
    return dict(key)


class ExecResult:
    """What a command did: exact bytes, exit code, and what the limits did."""

    def __init__(self, d):
        self.stdout = _unb64(d["stdout"])
        self.stderr = _unb64(d["stderr"])
        self.exit_code = d["exit_code"]
        self.term_signal = d["term_signal"]
        self.truncated = d["truncated"]
        self.oom_killed = d["oom_killed"]
        self.pids_exhausted = d["pids_exhausted"]
        self.no_space = d["no_space"]

    @property
    def text(self):
        return self.stdout.decode("utf-8", errors="replace")

    def __repr__(self):
        return f"ExecResult(exit_code={self.exit_code}, stdout={self.stdout[:60]!r})"


class _Pending:
    __slots__ = ("done", "response")

    def __init__(self):
        self.done = threading.Event()
        self.response = None


class Client:
    """One ``msb serve`` process. Use as a context manager, or call close().

    ``max_message`` is the largest request line (the server's --max-message):
    a larger request is refused here, before it is sent, with InvalidParams
    (the server could only answer it with an error it cannot attribute).
    """

    def __init__(self, msb=None, args=(), env=None, on_event=None, max_message=64 << 20):
        self.on_event = on_event
        self.max_message = max_message
        self.events = []
        self.unattributed = []  # error responses with id null (the server could not read an id)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending = {}
        self._ids = itertools.count(1)
        self._closed = False
        self._tools = {}  # (registry id, tool name) -> the Python callable
        self._proc = subprocess.Popen([msb or find_msb(), "serve", "--max-message",
                                       str(max_message), *args],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      env=env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- transport --------------------------------------------------------------------------
    def _read(self):
        for line in self._proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            for m in msg if isinstance(msg, list) else [msg]:
                if "id" in m and "method" in m:
                    # A request from the server (host_tool.call): answered on its own
                    # thread, so a slow tool never holds up the responses read here.
                    threading.Thread(target=self._serve_request, args=(m,),
                                     daemon=True).start()
                    continue
                if "id" not in m and m.get("method") == "event":
                    with self._lock:
                        self.events.append(m["params"])
                    if self.on_event:
                        self.on_event(m["params"])
                    continue
                if m.get("id") is None:
                    with self._lock:
                        self.unattributed.append(m)
                    continue
                with self._lock:
                    p = self._pending.pop(m.get("id"), None)
                if p:
                    p.response = m
                    p.done.set()
        with self._lock:
            self._closed = True
            pending, self._pending = self._pending, {}
        for p in pending.values():
            p.done.set()

    def _serve_request(self, m):
        reply = {"jsonrpc": "2.0", "id": m["id"]}
        p = m.get("params") or {}
        fn = self._tools.get((p.get("registry"), p.get("tool")))
        if m.get("method") != "host_tool.call" or fn is None:
            reply["error"] = {"code": -32601, "message": f"no handler for {m.get('method')!r}"}
        else:
            try:
                reply["result"] = fn(**p.get("arguments", {}))
            except Exception as e:  # the tool's failure: the guest sees the door's sentence
                reply["error"] = {"code": -32000, "message": f"{type(e).__name__}: {e}"}
        try:
            line = json.dumps(reply, allow_nan=False)
        except (TypeError, ValueError) as e:
            line = json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {
                "code": -32000, "message": f"the tool's value is not JSON: {e}"}})
        try:
            with self._write_lock:
                self._proc.stdin.write(line.encode() + b"\n")
                self._proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def call(self, method, _wait=None, **params):
        """Send one request and wait for its result (at most `_wait` seconds; None:
        as long as it takes); raise its error as an exception."""
        rid = next(self._ids)
        p = _Pending()
        with self._lock:
            if self._closed:
                raise ServerGone("msb serve is not running")
            self._pending[rid] = p
        line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                           "params": {k: v for k, v in params.items() if v is not None}})
        if len(line) > self.max_message:
            with self._lock:
                self._pending.pop(rid, None)
            raise InvalidParams(f"the {method} request is {len(line)} bytes, over the "
                                f"{self.max_message}-byte message limit")
        try:
            with self._write_lock:
                self._proc.stdin.write(line.encode() + b"\n")
                self._proc.stdin.flush()
        except (BrokenPipeError, ValueError) as e:
            raise ServerGone(f"msb serve is not running: {e}") from None
        if not p.done.wait(_wait):
            with self._lock:
                self._pending.pop(rid, None)
            raise TimeoutError(f"no response to {method} within {_wait} s")
        if p.response is None:
            raise ServerGone("msb serve exited before answering")
        if "error" in p.response:
            raise error_from_response(p.response["error"])
        return p.response.get("result")

    def close(self, timeout=60):
        """Close stdin (the server finishes what is running and exits) and wait."""
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            return self._proc.wait(timeout)
        finally:
            self._reader.join(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the API ----------------------------------------------------------------------------
    def version(self):
        return self.call("msb.version")["version"]

    def router(self, config):
        """A router from its JSON configuration (docs/policy.md, the CLI's JSON)."""
        r = self.call("router.new", config=config)
        return Router(self, r["router"], r["backends"], r["enabled"])

    def host_tools(self, require_declared=None, allowed_identities=None,
                   max_calls_per_run=None, call_timeout=None, response_limits=None):
        """A host-tool registry whose tools are Python callables answered by this
        client (docs/serve.md "Host tools"). `call_timeout` bounds each wait for an
        answer (default 60 s)."""
        r = self.call("host_tools.new", require_declared=require_declared,
                      allowed_identities=allowed_identities,
                      max_calls_per_run=max_calls_per_run, call_timeout=call_timeout,
                      response_limits=response_limits)
        return HostToolRegistry(self, r["registry"])


class HostToolRegistry:
    """Tools registered here run in this process when a guest program calls them,
    after the library's door has checked the call (schema, caps, identities)."""

    def __init__(self, client, rid):
        self.client, self.id = client, rid

    def register(self, name, fn, parameters=None, description=None, declaration=None):
        """`fn(**arguments)` returns any JSON value; an exception is the tool's
        failure. `declaration` is {"source", "sink", "identity"} (a key left out
        is unanswered)."""
        self.client._tools[(self.id, name)] = fn
        try:
            return self.client.call("host_tools.register", registry=self.id, name=name,
                                    parameters=parameters, description=description,
                                    declaration=declaration)["names"]
        except Exception:
            self.client._tools.pop((self.id, name), None)
            raise

    def tool(self, name=None, **kw):
        """Decorator form of register()."""
        def wrap(fn):
            self.register(name or fn.__name__, fn, **kw)
            return fn
        return wrap

    def aggregate(self):
        """The policy the registry implies; seals it."""
        return self.client.call("host_tools.aggregate", registry=self.id)

    def close(self):
        self.client.call("host_tools.free", registry=self.id)
        for k in [k for k in self.client._tools if k[0] == self.id]:
            self.client._tools.pop(k, None)


class Router:
    def __init__(self, client, rid, backends, enabled):
        self.client, self.id, self.backends, self.enabled = client, rid, backends, enabled

    def _call(self, method, **params):
        return self.client.call(method, router=self.id, **params)

    def ensure_can_serve(self, spec):
        self._call("router.ensure_can_serve", spec=spec)

    def resolve(self, spec):
        return self._call("router.resolve", spec=spec)

    def effective_cleanup(self, spec):
        return self._call("router.effective_cleanup", spec=spec)["cleanup"]

    def acquire(self, key, spec, call=None):
        r = self._call("router.acquire", key=_key(key), spec=spec, call=call)
        return Sandbox(self.client, r)

    def dispose(self, key):
        return self._call("router.dispose", key=_key(key))["all_disposed"]

    def dispose_scope(self, scope, thread_id):
        r = self._call("router.dispose_scope", scope=scope, thread_id=thread_id)
        return r["disposed"], r["undisposed"]

    def dispose_kind(self, key, kind, timeout=30.0, instance_id=None, call=None):
        return self._call("router.dispose_kind", key=_key(key), kind=kind, timeout=timeout,
                          instance_id=instance_id, call=call)["all_landed"]

    def purge_scoped_thread(self, scope, thread_id):
        """SandboxPurger.purge_scoped_thread: dispose_scope that never fails."""
        r = self._call("router.purge_scoped_thread", scope=scope, thread_id=thread_id)
        return r["disposed"], r["undisposed"]

    def options(self):
        """The router's options as JSON (rung strings, never ranks)."""
        return self._call("router.options")

    def dispose_unclean(self, key, timeout=30.0, kind=None, instance_id=None):
        return self._call("router.dispose_unclean", key=_key(key), timeout=timeout, kind=kind,
                          instance_id=instance_id)["all_landed"]

    def key_unclean(self, key):
        return self._call("router.key_unclean", key=_key(key))["unclean"]

    def session(self, spec, name=None, agent_dir=None, description=None, reclaim_timeout=None,
                admission_timeout=None, sink=None, existing="refuse"):
        """Attach a tool (msb/session.h); None when the router is disabled. `sink`
        (a host directory) is where its calls' collect_outputs land by default."""
        r = self._call("session.attach", spec=spec, name=name, agent_dir=agent_dir,
                       description=description, reclaim_timeout=reclaim_timeout,
                       admission_timeout=admission_timeout,
                       sink={"directory": str(sink), "existing": existing}
                       if sink is not None else None)
        return Session(self.client, r["session"]) if r["session"] else None

    def close(self):
        self._call("router.free")


class Sandbox:
    def __init__(self, client, r):
        self.client = client
        self.id = r["sandbox"]
        self.instance_id = r["instance_id"]
        self.backend = r["backend"]

    def _call(self, method, **params):
        return self.client.call(method, sandbox=self.id, **params)

    def exec(self, argv=None, shell=None, working_directory=None, env=None, stdin=None,
             timeout=30.0, tty=False, rows=None, cols=None):
        """`tty`: run on a terminal of rows x cols inside the sandbox (docs/cli-exec.md);
        everything then arrives in stdout."""
        return ExecResult(self._call("sandbox.exec", argv=argv, shell=shell,
                                     working_directory=working_directory, env=env,
                                     stdin=_b64(stdin) if stdin is not None else None,
                                     timeout=timeout, tty=tty, rows=rows, cols=cols))

    def exec_bounded(self, max_output_bytes, argv=None, shell=None, working_directory=None,
                     env=None, stdin=None, timeout=30.0, tty=False, rows=None, cols=None):
        return ExecResult(self._call("sandbox.exec_bounded", argv=argv, shell=shell,
                                     working_directory=working_directory, env=env,
                                     stdin=_b64(stdin) if stdin is not None else None,
                                     timeout=timeout, max_output_bytes=max_output_bytes,
                                     tty=tty, rows=rows, cols=cols))

    def run_code(self, code, timeout=30.0):
        return ExecResult(self._call("sandbox.run_code", code=code, timeout=timeout))

    def write_file(self, path, data, working_directory=None):
        return self._call("sandbox.write_file", path=path, data=_b64(data),
                          working_directory=working_directory)["written"]

    def read_file(self, path, working_directory=None, max_bytes=None):
        return _unb64(self._call("sandbox.read_file", path=path,
                                 working_directory=working_directory,
                                 max_bytes=max_bytes)["data"])

    def stat(self, path, working_directory=None):
        """The entry dict, or None when the path is absent."""
        r = self._call("sandbox.stat", path=path, working_directory=working_directory)
        return r["entry"] if r["present"] else None

    def list(self, path=".", working_directory=None):
        return self._call("sandbox.list", path=path,
                          working_directory=working_directory)["entries"]

    def remove(self, path, recursive=False, working_directory=None):
        self._call("sandbox.remove", path=path, recursive=recursive,
                   working_directory=working_directory)

    def reclaim(self, directory, working_directory=None, timeout=30.0):
        self._call("sandbox.reclaim", directory=directory, working_directory=working_directory,
                   timeout=timeout)

    def reset(self, timeout=30.0):
        self._call("sandbox.reset", timeout=timeout)

    def fingerprint(self):
        return self._call("sandbox.fingerprint")

    def collect_outputs(self, spec, sink=None, existing="refuse", outputs=None, call_id=None,
                        key=None, working_directory=None):
        """Land the spec's declared outputs (and call-time `outputs`, where the spec
        allows them) in the host directory `sink` (default for a call's sandbox:
        its session's sink); returns the landed artifacts (name, display, handle,
        media_type, size_bytes, sha256)."""
        return self._call("sandbox.collect_outputs", spec=spec,
                          sink={"directory": str(sink), "existing": existing}
                          if sink is not None else None,
                          outputs=outputs, call_id=call_id,
                          key=_key(key) if key is not None else None,
                          working_directory=working_directory)["artifacts"]

    def run_with_host_tools(self, registry, program, transport="exec", timeout=30.0,
                            program_name=None, run_directory=None, poll_interval=None,
                            interpreter=None, key=None, call=None):
        """Run a Python program that can call `registry`'s tools (transport "exec":
        `import maf_host_tools`; "native", ns only: `import msb_host_tools`)."""
        r = self._call("sandbox.run_with_host_tools", registry=registry.id, program=program,
                       transport=transport, timeout=timeout, program_name=program_name,
                       run_directory=run_directory, poll_interval=poll_interval,
                       interpreter=interpreter, key=_key(key) if key is not None else None,
                       call=call)
        res = ExecResult(r)
        res.calls, res.delivered, res.work = r["calls"], r["delivered"], r["work"]
        return res

    def release(self):
        """Drop the handle; the sandbox itself stays until the router disposes it."""
        self._call("sandbox.release")


class Session:
    """An attached tool (msb/session.h): each invocation is a Call."""

    def __init__(self, client, sid):
        self.client, self.id = client, sid

    def begin_call(self, scope=None, thread_id=None):
        r = self.client.call("session.begin_call", session=self.id, scope=scope,
                             thread_id=thread_id)
        return Call(self.client, r["call"], r["call_id"])

    def properties(self):
        """The tool's information-flow properties (additional_properties)."""
        return self.client.call("session.properties", session=self.id)

    def detach(self):
        self.client.call("session.detach", session=self.id)


class Call:
    """One tool call. As a context manager it ends with the result set by
    ``result()``/``refuse()``, as ``error`` when the block raises."""

    def __init__(self, client, hid, call_id):
        self.client, self.id, self.call_id = client, hid, call_id
        self._outcome = {"kind": "result", "text": ""}
        self.items = None

    def key(self):
        """The Key, or a sentence (str) for the model when there is none."""
        r = self.client.call("call.key", call=self.id)
        return Key.from_json(r["key"]) if "key" in r else r["sentence"]

    def acquire(self, key=None):
        """A Sandbox, or a sentence (str) for the model when none is available."""
        r = self.client.call("call.acquire", call=self.id,
                             key=_key(key) if key is not None else None)
        return Sandbox(self.client, r) if "sandbox" in r else r["sentence"]

    def guest_call_path(self):
        return self.client.call("call.guest_call_path", call=self.id)["path"]

    def report_unclean(self, sandbox, reason):
        """The call could not establish that its programs stopped in `sandbox` (8.8)."""
        self.client.call("call.report_unclean", call=self.id, sandbox=sandbox.id,
                         reason=reason)

    def result(self, text):
        self._outcome = {"kind": "result", "text": text}

    def refuse(self, text):
        self._outcome = {"kind": "refusal", "text": text}

    def end(self, kind=None, text=None, error=None):
        outcome = dict(self._outcome)
        if kind is not None:
            outcome = {"kind": kind}
        if text is not None:
            outcome["text"] = text
        if error is not None:
            outcome["error"] = error
        r = self.client.call("call.end", call=self.id, outcome=outcome)
        self.items = r["items"]
        return self.items

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None:
            self.end()
        else:
            name = getattr(exc, "name", None) or "RuntimeError"
            try:
                self.end(kind="error", error=name)
            except Exception:
                pass
        return False
