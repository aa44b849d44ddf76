"""`msb.exe serve` under Wine, driven from Linux (issue 21): JSON-RPC 2.0 over
the Windows program's stdin and stdout, as a Windows client would speak it.
scripts/test-windows runs this file (its passes and failures count in its
summary line); it needs build-win/ (MSB_BUILD_WIN) with msb.exe, msb.dll beside
it, and the recording wslc.exe stand-in (tests/windows/wslc_standin.c).
"""
import base64
import json
import os
import shutil
import subprocess
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("MSB_BUILD_WIN", os.path.join(ROOT, "build-win"))
MSB = os.path.join(BUILD, "cli", "msb.exe")
STANDIN = os.path.join(BUILD, "tests", "windows", "wslc.exe")
KEY = {"scope": "s", "thread_id": "t", "agent_dir": "a"}
NAME = "maf-sandbox-wslc-d510b9b10aa8"  # of KEY and kind "k" (21.13)


def win(path):
    """A Linux path as Wine's Z: drive names it."""
    return "Z:" + path.replace("/", "\\")


class Serve:
    def __init__(self, env):
        self.p = subprocess.Popen(["wine", MSB, "serve"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.lines = []
        self.cond = threading.Condition()
        self.next_id = 1
        self.stderr = b""
        threading.Thread(target=self._err, daemon=True).start()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _err(self):
        self.stderr = self.p.stderr.read()

    def _read(self):
        for raw in self.p.stdout:
            # One JSON value a line, "\n" only: Windows' text mode would add "\r".
            assert raw.endswith(b"\n") and not raw.endswith(b"\r\n"), raw
            with self.cond:
                self.lines.append(json.loads(raw))
                self.cond.notify_all()

    def call(self, method, **params):
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()
        with self.cond:
            ok = self.cond.wait_for(lambda: any(m.get("id") == rid for m in self.lines), 60)
            assert ok, f"no answer to {method}; stderr: {self.stderr!r}"
            r = next(m for m in self.lines if m.get("id") == rid)
        assert "result" in r, r
        return r["result"], self.lines.index(r)

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait(60)
        self.t.join(10)
        return rc


@pytest.fixture
def env(tmp_path):
    assert os.path.exists(MSB) and os.path.exists(os.path.join(BUILD, "cli", "msb.dll")), \
        "scripts/test-windows builds msb.exe and puts msb.dll beside it"
    e = dict(os.environ, MSB_CONFIG="", WINEDEBUG="-all")
    e.setdefault("WINEPREFIX", os.path.join(BUILD, "wine"))
    return e


def test_serve_session_over_the_fake(env):
    s = Serve(env)
    router, _ = s.call("router.new", config={"min_isolation": "none",
                                             "backends": [{"type": "fake"}]})
    router = router["router"]
    a, at = s.call("router.acquire", router=router, key=KEY, spec={"kind": "shell"})
    # the observer's event came before the response that caused it (17.6)
    assert any(m.get("method") == "event" and m["params"]["event"] == "SandboxAcquired"
               for m in s.lines[:at])
    sb = a["sandbox"]
    data = bytes(range(256))
    w, _ = s.call("sandbox.write_file", sandbox=sb, path="d.bin",
                  data=base64.b64encode(data).decode())
    assert w == {"written": 256}
    r, _ = s.call("sandbox.read_file", sandbox=sb, path="d.bin")
    assert base64.b64decode(r["data"]) == data
    r, _ = s.call("sandbox.run_code", sandbox=sb, code="print(1)")
    assert r["exit_code"] == 0
    d, _ = s.call("router.dispose", router=router, key=KEY)
    assert d == {"all_disposed": True}
    assert s.close() == 0


def test_serve_session_over_wslc_through_the_standin(env, tmp_path):
    """The wslc backend of msb.exe spawning wslc.exe (our recording stand-in):
    acquire creates the container, exec runs in it, dispose removes it."""
    log = tmp_path / "log"
    script = tmp_path / "script"
    script.write_text(
        "when container list -a --format json --filter name=\n"
        "when container list -a --format json --filter label=\n"
        'out {"ID":"cid123","Names":"' + NAME + '","Labels":"maf-sandbox.scope=s,'
        'maf-sandbox.thread=t,maf-sandbox.agent=a,maf-sandbox.kind=k","State":"running"}\n'
        "when container run -d --name\n"
        "out cid123\n"
        "when container exec --user 0 cid123 mkdir\n"
        "when container exec -w /maf-sandbox/work cid123 python3 -c print(6*7)\n"
        "out 42\n"
        "when container remove -f\n"
        "out cid123\n")
    env = dict(env, MSB_STANDIN_LOG=win(str(log)), MSB_STANDIN_SCRIPT=win(str(script)))
    s = Serve(env)
    router, _ = s.call("router.new", config={
        "min_isolation": "container",
        "backends": [{"type": "wslc", "wslc_path": win(STANDIN), "image": "python:3"}]})
    router = router["router"]
    a, _ = s.call("router.acquire", router=router, key=KEY, spec={"kind": "k"})
    assert a["backend"] == "wslc" and a["instance_id"] == "cid123"
    r, _ = s.call("sandbox.exec", sandbox=a["sandbox"], argv=["python3", "-c", "print(6*7)"])
    assert base64.b64decode(r["stdout"]) == b"42" and r["exit_code"] == 0
    d, _ = s.call("router.dispose", router=router, key=KEY)
    assert d == {"all_disposed": True}
    assert s.close() == 0
    calls = log.read_text().splitlines()
    assert calls[0] == "container list -a --format json --filter name=" + NAME
    assert calls[1].startswith("container run -d --name " + NAME + " --network none")
    assert calls[1].endswith(" python:3 sleep infinity")
    assert "container exec -w /maf-sandbox/work cid123 python3 -c print(6*7)" in calls
    assert calls[-1] == "container remove -f " + NAME


def test_run_as_docs_windows_says(env, tmp_path):
    """`msb.exe run --backend wslc --min-isolation container -- python3 -c ...`
    (docs/windows.md) with `wslc` found on PATH: the stand-in's."""
    log = tmp_path / "log"
    script = tmp_path / "script"
    script.write_text(
        "when container list -a --format json --filter name=\n"
        "when container list -a --format json --filter label=\n"
        "err WSLC_E_SERVICE_UNAVAILABLE\n"
        "exit 1\n"
        "when container run -d --name\n"
        "out cid9\n"
        "when container exec --user 0 cid9 mkdir\n"
        "when container exec -w /maf-sandbox/work cid9 python3 -c print(6*7)\n"
        "out 42\n"
        "exit 5\n"
        "when container remove -f\n"
        "out cid9\n")
    env = dict(env, MSB_STANDIN_LOG=win(str(log)), MSB_STANDIN_SCRIPT=win(str(script)),
               WINEPATH=win(os.path.dirname(STANDIN)))
    p = subprocess.run(["wine", MSB, "run", "--backend", "wslc", "--image", "python:3-slim",
                        "--min-isolation", "container", "--", "python3", "-c", "print(6*7)"],
                       stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=120)
    assert p.stdout == b"42" and p.returncode == 5, p
    calls = log.read_text().splitlines()
    assert calls[1].startswith("container run -d --name maf-sandbox-wslc-")
    assert calls[1].endswith(" python:3-slim sleep infinity")
    # the call-scoped sandbox is disposed of: the listing by labels fails
    # here, so the name this process made is removed (21.30)
    name = calls[1].split()[4]
    assert calls[-1] == "container remove -f " + name


def test_run_lands_outputs_through_the_windows_sink_12_26_12_27(env, tmp_path):
    """msb.exe run --output --sink: the filesystem sink's Windows form
    (sink_fs_win32.c) behind the CLI - landed, then refused as existing
    unless --replace, and refused through a link (a unix symlink to a
    directory, which Wine shows as a reparse point)."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({
        "router": {"min_isolation": "none"},
        "backend": {"type": "fake", "posix_guest": True,
                    "seed_files": [{"path": "/maf-sandbox/work/out/r.txt", "text": "result-42"}],
                    "declarations": {"capabilities": ["exec", "files_in", "files_out"],
                                     "egress_modes": ["closed"],
                                     "isolation_scopes": ["call", "conversation"]}}}))
    env = dict(env, MSB_CONFIG=win(str(cfg)))
    sink = tmp_path / "sink"
    sink.mkdir()

    def run(sink_dir, *extra):
        return subprocess.run(["wine", MSB, "run", "--backend", "fake", "--output", "out/r.txt",
                               "--sink", win(str(sink_dir)), *extra, "--", "true"],
                              stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=120)
    p = run(sink)
    assert p.returncode == 0, p
    assert (sink / "out" / "r.txt").read_text() == "result-42"
    assert win(str(sink / "out" / "r.txt")).encode() in p.stderr  # the Windows handle
    p = run(sink)
    assert p.returncode == 8 and b"SandboxLandingExists" in p.stderr, p
    (sink / "out" / "r.txt").write_text("old")
    assert run(sink, "--replace").returncode == 0
    assert (sink / "out" / "r.txt").read_text() == "result-42"
    # a link on the way: refused, nothing lands where it points
    linked, outside = tmp_path / "linked", tmp_path / "outside"
    linked.mkdir()
    outside.mkdir()
    (linked / "out").symlink_to(outside)
    p = run(linked)
    assert p.returncode == 8 and b"SandboxLandingNotConfined" in p.stderr, p
    assert list(outside.iterdir()) == []


def test_ls_lists_what_the_wslc_engine_holds(env, tmp_path):
    """`msb.exe ls` with the wslc backend (issue 21; 21.30-21.31): the
    containers `container list` reports with msb's labels, this backend's
    workloads only (no proxy, no other prefix); a state the listing leaves
    out asked by name."""
    log = tmp_path / "log"
    script = tmp_path / "script"
    lab = '"maf-sandbox.scope":"s","maf-sandbox.thread":"t","maf-sandbox.agent":"a"'
    script.write_text(
        "when container list -a --format json --filter label=maf-sandbox.kind\n"
        'out [{"ID":"c1","Names":["' + NAME + '"],"Image":"python:3","State":"running",'
        '"CreatedAt":"2026-01-02 03:04:05 +0000 UTC","Labels":{' + lab +
        ',"maf-sandbox.kind":"k"}},\n'
        'out {"ID":"c2","Names":"maf-sandbox-wslc-000000000002","Image":"alpine",'
        '"State":"exited","Created":1767323045,"Labels":"maf-sandbox.thread=t2,'
        'maf-sandbox.kind=job"},\n'
        'out {"ID":"c3","Names":"maf-sandbox-wslc-000000000003","Labels":'
        '"maf-sandbox.thread=t3,maf-sandbox.kind=k"},\n'
        'out {"ID":"p1","Names":"' + NAME + '-proxy","State":"running","Labels":{' + lab +
        ',"maf-sandbox.kind":"k","maf-sandbox.role":"proxy"}},\n'
        'out {"ID":"d1","Names":"maf-sandbox-docker-000000000001","State":"running",'
        '"Labels":{"maf-sandbox.kind":"k"}}]\n'
        "when container list -a --format json --filter name=maf-sandbox-wslc-000000000003\n"
        'out {"ID":"c3","Names":"maf-sandbox-wslc-000000000003"}\n'
        "when container list --format json --filter name=maf-sandbox-wslc-000000000003\n"
        'out {"ID":"c3","Names":"maf-sandbox-wslc-000000000003"}\n'
        "when container\n"
        "err unexpected\n"
        "exit 1\n")
    cfg = tmp_path / "wslc.json"
    cfg.write_text(json.dumps({"type": "wslc", "wslc_path": win(STANDIN)}))
    env = dict(env, MSB_STANDIN_LOG=win(str(log)), MSB_STANDIN_SCRIPT=win(str(script)))

    def ls(*extra):
        return subprocess.run(["wine", MSB, "ls", "--config", win(str(cfg)), *extra],
                              stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=120)
    p = ls("--json")
    assert p.returncode == 0, p
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert set(rows) == {NAME, "maf-sandbox-wslc-000000000002",
                         "maf-sandbox-wslc-000000000003"}, rows
    r = rows[NAME]
    assert (r["scope"], r["thread_id"], r["agent_dir"], r["kind"]) == ("s", "t", "a", "k")
    assert (r["state"], r["alive"], r["image"], r["backend"]) == ("running", True, "python:3",
                                                                  "wslc")
    assert r["instance_id"] == "c1" and r["created_ns"] == 1767323045 * 10**9
    assert r["age_s"] > 0
    r = rows["maf-sandbox-wslc-000000000002"]
    assert (r["state"], r["scope"], r["kind"], r["image"]) == ("stopped", None, "job", "alpine")
    assert r["created_ns"] == 1767323045 * 10**9
    r = rows["maf-sandbox-wslc-000000000003"]
    assert r["state"] == "running" and r["image"] is None and r["created_ns"] is None
    calls = log.read_text().splitlines()
    assert calls == [
        "container list -a --format json --filter label=maf-sandbox.kind",
        "container list -a --format json --filter name=maf-sandbox-wslc-000000000003",
        "container list --format json --filter name=maf-sandbox-wslc-000000000003"]
    p = ls()
    lines = p.stdout.decode().splitlines()
    assert p.returncode == 0 and lines[0].split()[:3] == ["NAME", "STATE", "BACKEND"], p
    assert lines[1].split()[:4] == [NAME, "running", "wslc", "python:3"]
    assert lines[1].endswith("scope=s thread=t agent=a kind=k")
    # the engine's refusal is the verb's, typed
    script.write_text("when container\nerr WSLC_E_SERVICE_UNAVAILABLE\nexit 1\n")
    p = ls()
    assert p.returncode != 0 and b"WSLC_E_SERVICE_UNAVAILABLE" in p.stderr, p


def test_config_lookup_appdata_then_programdata(env):
    """msb.exe's configuration file: %MSB_CONFIG%, else
    %APPDATA%\\msb\\config.json, else %ProgramData%\\msb\\config.json;
    `msb config show` says which and how. With none, the backend is wslc,
    Windows' default, as the help says. Wine sets both variables from its
    prefix (a value from the environment is not kept), so the files go in the
    test prefix's own folders and are removed after."""
    env = {k: v for k, v in env.items() if k != "MSB_CONFIG"}
    p = subprocess.run(["wine", "cmd", "/c", "echo %APPDATA%^|%ProgramData%"],
                       stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=120)
    appdata_w, progdata_w = p.stdout.decode().strip().split("|")
    assert appdata_w[:3].upper() == "C:\\" and progdata_w[:3].upper() == "C:\\", p

    def unix(w):
        return os.path.join(env["WINEPREFIX"], "drive_c", *w[3:].split("\\"), "msb")
    appdata, progdata = unix(appdata_w), unix(progdata_w)
    assert not os.path.exists(appdata) and not os.path.exists(progdata), "left by a run"

    def show():
        p = subprocess.run(["wine", MSB, "config", "show", "--json"], stdin=subprocess.DEVNULL,
                           capture_output=True, env=env, timeout=120)
        assert p.returncode == 0, p
        return json.loads(p.stdout)
    try:
        out = show()
        assert out["file"] is None and out["found_by"] is None
        assert out["values"]["backend.type"] == {"value": "wslc",
                                                 "source": "built-in default"}
        os.makedirs(progdata)
        with open(os.path.join(progdata, "config.json"), "w") as f:
            f.write('{"router": {"min_isolation": "vm"}}')
        out = show()
        assert out["file"] == progdata_w + "\\msb\\config.json", out
        assert out["found_by"] == "%ProgramData%"
        assert out["values"]["router.min_isolation"] == {"value": "vm", "source": "file"}
        os.makedirs(appdata)
        with open(os.path.join(appdata, "config.json"), "w") as f:
            f.write('{"router": {"min_isolation": "none"}}')
        out = show()
        assert out["file"] == appdata_w + "\\msb\\config.json"
        assert out["found_by"] == "%APPDATA%"
        assert out["values"]["router.min_isolation"]["value"] == "none"
        p = subprocess.run(["wine", MSB, "config", "show"], stdin=subprocess.DEVNULL,
                           capture_output=True, env=env, timeout=120)
        assert b"(found by %APPDATA%)" in p.stdout, p
    finally:
        shutil.rmtree(appdata, ignore_errors=True)
        shutil.rmtree(progdata, ignore_errors=True)
    # --help and the manual name this platform's default and places
    p = subprocess.run(["wine", MSB, "run", "--help"], stdin=subprocess.DEVNULL,
                       capture_output=True, env=env, timeout=120)
    assert b"(default `wslc`;" in p.stdout, p
    p = subprocess.run(["wine", MSB, "man"], stdin=subprocess.DEVNULL, capture_output=True,
                       env=env, timeout=120)
    assert b"ProgramData" in p.stdout and b"XDG_CONFIG_HOME" not in p.stdout
