"""The `docker` and `wslc` backends against a real, private dockerd (issue 19).

The docker backend's own tests run twice: against dockerd and against
podman's Docker-compatible API service (tests/e2e/podman.py), the `engine`
fixture's two parameters. What drives dockerd beyond the backend - the wslc
stand-in (the docker CLI), the CLI's escape suite, the allowlist topology's
bridge and DNS recorder - runs against dockerd alone (`DOCKERD_ONLY`); on
podman the topology is refused, and that is tested (`PODMAN_ONLY`).

Checklist section 21 and 22.1-22.7. Every operation runs through
build/tests/engine/msb-engine-tool, one process each, so get-or-create and
disposal are exercised across processes (the name from the key, the labels
the engine reports). The wslc backend runs its real argv through
tests/fixtures/wslc, a stand-in that renames the contract onto the docker
CLI. Needs root and docker.io (scripts/install-deps).
"""
import hashlib
import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import BUILD, ROOT
from dockerd import IMAGE, TOOLS_IMAGE, PrivateDockerd
from podman import PrivatePodman

TOOL = os.path.join(BUILD, "tests", "engine", "msb-engine-tool")
WSLC = os.path.join(ROOT, "tests", "fixtures", "wslc")
PROXY = os.path.join(BUILD, "proxy", "msb-egress-proxy")


ENGINES = ["dockerd", "podman"]
DOCKERD_ONLY = pytest.mark.parametrize("engine", ["dockerd"], indirect=True)
PODMAN_ONLY = pytest.mark.parametrize("engine", ["podman"], indirect=True)


@pytest.fixture(scope="module", params=ENGINES)
def engine(request):
    if os.geteuid() != 0:
        pytest.fail("the engine tests need root to run a private engine")
    d = PrivateDockerd() if request.param == "dockerd" else PrivatePodman()
    host_net = _host_networking()
    try:
        d.start()
        d.import_image()
        if d.kind == "dockerd":
            d.import_tools_image()
            d.with_egress()
        yield d
    finally:
        bridges = d.bridges() if d.proc and d.proc.poll() is None else []
        d.cleanup()
    # The engine took nothing of the host's networking with it: no bridge of
    # its names is left, the forwarding setting and the packet filter are as
    # they were (--iptables=false --ip-forward=false).
    left = [b for b in bridges + [d.out_network] if os.path.exists(f"/sys/class/net/{b}")]
    assert left == [], left
    fwd, rules = _host_networking()
    assert fwd == host_net[0]
    # Other suites may change the host's rules meanwhile: only an engine's.
    new = [r for r in rules - host_net[1] if "DOCKER" in r or "br-" in r or d.out_network in r]
    assert new == [], new


def _host_networking():
    with open("/proc/sys/net/ipv4/ip_forward") as f:
        fwd = f.read()
    rules = set()
    for table in ("filter", "nat"):
        rules |= set(subprocess.run(["iptables", "-t", table, "-S"], capture_output=True,
                                    text=True).stdout.splitlines())
    return fwd, rules


AGENT = os.path.join(BUILD, "agent", "msb-agent")


class Backend:
    """msb-engine-tool on a backend JSON; `agent` is msb-agent for the
    confined file plane (None: not found, so the tar-header walk)."""

    def __init__(self, engine, cfg, agent=AGENT, hostfs=True):
        self.engine = engine
        self.cfg = json.dumps(cfg)
        self.agent = agent or "/nonexistent/msb-agent"
        self.hostfs = hostfs

    def __call__(self, op, proc_timeout=180, **req):
        req["op"] = op
        env = self.engine.env()
        env["MSB_AGENT"] = self.agent
        if not self.hostfs:
            env["MSB_ENGINE_HOSTFS"] = "0"
        p = subprocess.run([TOOL, self.cfg, json.dumps(req)], capture_output=True,
                           timeout=proc_timeout, env=env)
        out = p.stdout.decode().strip()
        assert out, p.stderr
        doc = json.loads(out.splitlines()[-1])
        return doc

    def ok(self, op, **req):
        doc = self(op, **req)
        assert "error" not in doc, doc
        return doc


@pytest.fixture(scope="module")
def docker(engine):
    return Backend(engine, {"type": "docker", "host": engine.host, "image": IMAGE})


@pytest.fixture(scope="module")
def docker_agent(engine):
    """The docker backend with the host's file plane off: the confined agent."""
    return Backend(engine, {"type": "docker", "host": engine.host, "image": IMAGE}, hostfs=False)


@pytest.fixture(scope="module")
def docker_walk(engine):
    """The docker backend without msb-agent nor the host's file plane: the
    tar-header walk."""
    return Backend(engine, {"type": "docker", "host": engine.host, "image": IMAGE}, agent=None,
                   hostfs=False)


@pytest.fixture(scope="module")
def wslc(engine):
    return Backend(engine, {"type": "wslc", "wslc_path": WSLC, "image": IMAGE,
                            "command_timeout": 60})


def key(thread, scope="e2e", agent="agent"):
    return {"scope": scope, "thread": thread, "agent": agent}


def out(doc, stream="stdout"):
    return bytes.fromhex(doc[stream])


# ---- declarations and doctor (22.1-22.6) -------------------------------------------------


def test_doctor_and_declarations(docker, docker_walk):
    d = docker.ok("doctor")
    assert d["ok"] and "API 1." in d["reason"] and "the confined agent" in d["reason"]
    assert "file plane: the host's" in d["reason"]
    assert "exec: one msb-agent per handle on a kept stream" in d["reason"]
    d = docker_walk.ok("doctor")
    assert d["ok"] and "file plane: the tar-header walk" in d["reason"]
    assert "exec: one engine exec per call" in d["reason"]
    decl = docker.ok("declarations")
    assert decl["name"] == "docker" and decl["isolation"] == "container"  # 22.1
    dd = decl["declarations"]
    assert set(dd["capabilities"]) == {"exec", "files_in", "files_out", "files_delete",
                                       "host_tools", "reclaim"}  # 22.2
    assert dd["egress_modes"] == ["closed"]  # no proxy image: closed only (22.4)
    assert dd["os_families"] == ["posix"]  # from the engine's OSType (22.6)
    lim = {"max_bytes_per_file": 64 << 20, "max_total_bytes": 256 << 20, "max_files": 256}
    assert dd["limits"] == {"files_in": lim, "files_out": lim}  # 22.5
    assert dd["egress_method_tokens"] == []  # 22.13


def test_a_remote_host_is_refused(engine):
    b = Backend(engine, {"type": "docker", "host": "tcp://127.0.0.1:2375"})
    e = b("declarations")["error"]
    assert e["name"] == "ValueError" and "not a unix socket" in e["message"]


def test_an_unreachable_engine_is_a_typed_error(engine):
    b = Backend(engine, {"type": "docker", "host": "unix:///nonexistent/docker.sock"})
    e = b("declarations")["error"]
    assert e["name"] == "OSError" and "not reachable" in e["message"]
    d = b.ok("doctor")
    assert d["ok"] is False and "not reachable" in d["reason"]


# ---- exec ----------------------------------------------------------------------------------


def test_exec_bytes_and_exit_codes(docker):
    k = key("exec")
    r = docker.ok("exec", key=k, argv=["sh", "-c", 'printf "a\\000\\377b"; printf err >&2; exit 3'])
    assert out(r) == b"a\x00\xffb" and out(r, "stderr") == b"err" and r["exit_code"] == 3
    hostile = "$(touch /tmp/x); `id` 'q' \"d\" \\ *"
    r = docker.ok("exec", key=k, argv=["printf", "[%s]", hostile])
    assert out(r) == f"[{hostile}]".encode()  # argv passed natively, never shell-split
    r = docker.ok("exec", key=k, argv=["cat"], stdin_hex=(b"\x00in\xff" * 1000).hex())
    assert out(r) == b"\x00in\xff" * 1000
    r = docker.ok("exec", key=k, shell="pwd; echo $0")
    assert out(r) == b"/maf-sandbox/work\nsh\n"
    docker.ok("exec", key=k, argv=["mkdir", "-p", "sub/dir"])
    r = docker.ok("exec", key=k, argv=["pwd"], wd="sub/dir")
    assert out(r) == b"/maf-sandbox/work/sub/dir\n"
    # Any existing directory, absolute or relative to the storage base; a
    # missing one runs nothing: 126 and why on stderr (issue 16).
    r = docker.ok("exec", key=k, argv=["pwd"], wd="../../etc")
    assert out(r) == b"/etc\n" and r["exit_code"] == 0
    r = docker.ok("exec", key=k, argv=["pwd"], wd="/")
    assert out(r) == b"/\n" and r["exit_code"] == 0
    for wd, why in (("/no/such", b"No such file or directory"), ("/etc/passwd", b"Not a directory")):
        r = docker.ok("exec", key=k, argv=["sh", "-c", "echo ran"], wd=wd)
        assert (r["exit_code"], out(r)) == (126, b""), r
        assert out(r, "stderr") == b"msb: working directory `" + wd.encode() + b"`: " + why + b"\n"
    # A large output arrives whole, and exec_bounded stops at its budget.
    r = docker.ok("exec", key=k, argv=["head", "-c", "3000000", "/dev/zero"])
    assert len(out(r)) == 3000000
    r = docker.ok("exec_bounded", key=k, argv=["head", "-c", "100000", "/dev/zero"],
                  max_output=1000)
    # On the kept agent stream, as under ns: past the budget the agent closes
    # the pipes and the workload meets SIGPIPE (docs/internals/protocol.md).
    assert len(out(r)) == 1000 and r["truncated"] is True and r["exit_code"] == 128 + 13


def test_exec_timeout_kills_the_process_group(docker):
    k = key("timeout")
    t0 = time.monotonic()
    e = docker("exec", key=k, argv=["sh", "-c", "sleep 300 & sleep 301"], timeout=1)["error"]
    assert e["name"] == "TimeoutError" and "process group was killed" in e["message"]
    assert time.monotonic() - t0 < 10
    # Nothing of it is left, and the sandbox still serves.
    r = docker.ok("exec", key=k, argv=["ps", "-o", "args"])
    assert b"sleep 30" not in out(r), out(r)


def _engine_agents(engine, cid):
    """The kept agents (relay and agent) running in container cid: pids."""
    ps = engine.cli("exec", cid, "ps", "-o", "pid,args").stdout
    return [ln.split()[0] for ln in ps.splitlines()
            if "/.msb/msb-agent" in ln and "--engine" in ln]


def test_execs_ride_one_kept_agent_stream_renewed_when_lost(docker, engine, tmp_path):
    # Issue 19: one msb-agent per handle on a kept stream; each exec is
    # frames on it (the workload's parent is that agent, the same one for
    # every exec). Killed while idle, it is renewed before the next exec;
    # killed under an exec, that exec fails typed and the next one renews.
    k = key("kept")
    cid = docker.ok("acquire", key=k)["instance_id"]
    go = tmp_path / "go"
    who = ["sh", "-c", 'echo $PPID; tr "\\0" " " < /proc/$PPID/cmdline']
    steps = [{"exec": who}, {"exec": who}, {"wait_file": str(go)}, {"exec": who},
             {"exec": ["sh", "-c", "kill -9 $PPID; sleep 2"], "timeout": 60}, {"exec": who}]
    env = dict(engine.env(), MSB_AGENT=AGENT)
    p = subprocess.Popen([TOOL, docker.cfg, json.dumps({"op": "steps", "key": k,
                                                        "steps": steps})],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        for _ in range(200):
            pids = _engine_agents(engine, cid)
            if pids or p.poll() is not None:
                break
            time.sleep(0.05)
        assert pids, p.poll()
        engine.cli("exec", cid, "kill", "-9", *pids, check=True)
        go.touch()
        stdout, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    res = json.loads(stdout.decode().splitlines()[-1])["results"]
    first, second, _, renewed, killed, after = res
    parents = []
    for r in (first, second, renewed, after):
        assert r.get("exit_code") == 0, (r, stderr)
        pid, cmdline = out(r).decode().split("\n", 1)
        assert cmdline.startswith("/.msb/msb-agent"), cmdline
        assert "--engine --work /maf-sandbox/work" in cmdline, cmdline
        parents.append(pid)
    assert parents[0] == parents[1]  # one stream for both
    assert parents[2] != parents[1] and parents[3] != parents[2]  # fresh ones
    e = killed["error"]
    assert e["name"] == "RuntimeError" and "kept agent stream" in e["message"], e
    # The handle released with the process: no agent is left behind.
    for _ in range(200):
        if not _engine_agents(engine, cid):
            break
        time.sleep(0.05)
    assert _engine_agents(engine, cid) == []
    docker.ok("dispose", key=k, any_kind=True)


# ---- files (22.7) --------------------------------------------------------------------------


def test_files_in_and_out(docker, tmp_path):
    k = key("files")
    blob = os.urandom(1 << 20)
    src = tmp_path / "blob"
    src.write_bytes(blob)
    docker.ok("write", key=k, path="deep/er/blob.bin", file=str(src))
    r = docker.ok("exec", key=k, argv=["sha256sum", "deep/er/blob.bin"])
    assert out(r).split()[0].decode() == hashlib.sha256(blob).hexdigest()
    got = tmp_path / "got"
    docker.ok("read", key=k, path="deep/er/blob.bin", out=str(got))
    assert got.read_bytes() == blob
    s = docker.ok("stat", key=k, path="deep/er/blob.bin")
    assert s == {"present": True, "path": "deep/er/blob.bin", "kind": "file",
                 "size_known": True, "size": 1 << 20}
    assert docker.ok("stat", key=k, path="deep")["kind"] == "directory"
    assert docker.ok("stat", key=k, path="nothing") == {"present": False}
    # A second write replaces, and the mode is 0644 root's.
    docker.ok("write", key=k, path="deep/er/blob.bin", data_hex=b"short".hex())
    r = docker.ok("exec", key=k, argv=["sh", "-c", "cat deep/er/blob.bin; stat -c ' %a %u' deep/er/blob.bin"])
    assert out(r) == b"short 644 0\n"
    e = docker("remove", key=k, path="deep")["error"]
    assert "recursive" in e["message"], e
    docker.ok("remove", key=k, path="deep", recursive=True)
    assert docker.ok("stat", key=k, path="deep") == {"present": False}
    # The host's file plane serves a handle that never execs without placing
    # an agent (a local engine); only an exec places it, for the kept stream.
    k2 = key("files-host")
    cid = docker.ok("acquire", key=k2)["instance_id"]
    docker.ok("write", key=k2, path="x.bin", file=str(src))
    assert docker.ok("read", key=k2, path="x.bin", out=str(tmp_path / "x"))["len"] == len(blob)
    assert ".msb" not in docker.engine.cli("exec", cid, "ls", "-a", "/").stdout.split()
    docker.ok("dispose", key=k2, any_kind=True)


def test_caps_are_counted_on_the_host(docker, tmp_path):
    k = key("caps")
    docker.ok("exec", key=k, argv=["sh", "-c", "head -c 2000000 /dev/zero > big"])
    e = docker("read", key=k, path="big", max_bytes=1000)["error"]
    assert e["name"] == "SandboxTransferCapExceeded" and "2000000 bytes" in e["message"]
    # Past the backend's own per-file ceiling (22.5) either way.
    docker.ok("exec", key=k, argv=["sh", "-c", "head -c 67108865 /dev/zero > huge"])
    e = docker("read", key=k, path="huge", max_bytes=1 << 30)["error"]
    assert e["name"] == "SandboxTransferCapExceeded"
    huge = tmp_path / "huge"
    with open(huge, "wb") as f:
        f.truncate((64 << 20) + 1)
    e = docker("write", key=k, path="w.bin", file=str(huge))["error"]
    assert e["name"] == "SandboxTransferCapExceeded"


@pytest.fixture(params=["hostfs", "agent"])
def confined(request, docker, docker_agent):
    """The two confined file planes: the host's through the container's root,
    and msb-agent run in the container."""
    return docker if request.param == "hostfs" else docker_agent


def test_links_are_refused_never_followed(confined):
    docker = confined
    k = key("links")  # both planes on one container: the setup is idempotent
    docker.ok("exec", key=k, argv=["sh", "-c",
                                   "mkdir -p /outside && echo secret > /outside/s && "
                                   "ln -sfn /outside out && ln -sfn /outside/s leaf"])
    for path in ("out/s", "leaf"):
        e = docker("read", key=k, path=path)["error"]
        assert "link" in e["message"], e
    e = docker("write", key=k, path="out/new", data_hex="00")["error"]
    assert e["name"] == "ValueError" and "link" in e["message"]
    e = docker("write", key=k, path="leaf", data_hex="00")["error"]
    assert e["name"] == "ValueError"
    r = docker.ok("exec", key=k, argv=["cat", "/outside/s"])
    assert out(r) == b"secret\n"
    assert docker.ok("stat", key=k, path="leaf")["kind"] == "symlink"
    docker.ok("remove", key=k, path="leaf")
    assert docker.ok("stat", key=k, path="leaf") == {"present": False}
    r = docker.ok("exec", key=k, argv=["cat", "/outside/s"])
    assert out(r) == b"secret\n"  # the link went, not what it pointed at


def test_the_storage_base_swapped_for_a_link_is_not_followed(docker):
    """The host's file plane resolves the storage base inside the container's
    root with no link allowed: a guest that replaces it with a link to /etc
    (which, followed from the host, would be the host's) gets a refusal."""
    k = key("base-swap")
    docker.ok("write", key=k, path="f", data_hex=b"x".hex())
    docker.ok("exec", key=k, argv=["sh", "-c", "mv /maf-sandbox/work /maf-sandbox/w2 && "
                                   "ln -s /etc /maf-sandbox/work"], wd="/")
    for path in ("passwd", "hostname"):
        e = docker("read", key=k, path=path)["error"]
        assert "link" in e["message"] or "No such" in e["message"], e
    e = docker("write", key=k, path="planted", data_hex="00")["error"]
    assert e, e
    assert not os.path.exists("/etc/planted")
    docker.ok("dispose", key=k, any_kind=True)


SWAPPER = ("mkdir -p /outside real && echo SECRET > /outside/f && echo benign > real/f && "
           "setsid sh -c 'while true; do mv real real.tmp; ln -s /outside real; "
           "mv real real.lnk; mv real.tmp real; rm real.lnk; done' >/dev/null 2>&1 &")


def test_a_link_swapped_in_is_never_followed(confined):
    """22.7 and the issue's residual: the guest swaps a directory of the path
    for a link to a secret outside the working directory, as fast as it can,
    while the host reads through it. The confined agent resolves the whole
    path in one openat2: it returns the file, refuses the link, or finds
    nothing - never the secret. (The tar-header walk, between its stat and the
    archive read, returned the secret in some of 60 reads here.)"""
    docker = confined
    k = key(f"swap-{docker.hostfs}")
    docker.ok("exec", key=k, argv=["sh", "-c", SWAPPER])
    r = docker.ok("read_race", key=k, path="real/f", repeat=40)
    assert "SECRET\n" not in r["contents"], r
    assert r["contents"] or r["errors"], r
    docker.ok("dispose", key=k, any_kind=True)


def test_the_walk_when_there_is_no_agent(docker_walk, tmp_path):
    k = key("walk")
    docker_walk.ok("write", key=k, path="a/b.txt", data_hex=b"walk\x00".hex())
    assert out(docker_walk.ok("exec", key=k, argv=["cat", "a/b.txt"])) == b"walk\x00"
    got = docker_walk.ok("read", key=k, path="a/b.txt")
    assert bytes.fromhex(got["data"]) == b"walk\x00"
    assert docker_walk.ok("stat", key=k, path="a")["kind"] == "directory"
    docker_walk.ok("exec", key=k, argv=["ln", "-s", "/etc", "l"])
    e = docker_walk("read", key=k, path="l/passwd")["error"]
    assert e["name"] == "ValueError" and "link" in e["message"]
    e = docker_walk("read", key=k, path="l")["error"]
    assert "link" in e["message"]
    docker_walk.ok("remove", key=k, path="a", recursive=True)
    assert docker_walk.ok("stat", key=k, path="a") == {"present": False}
    # No agent was placed: the walk alone.
    r = docker_walk.ok("exec", key=k, argv=["ls", "-a", "/"])
    assert b".msb" not in out(r).split()
    docker_walk.ok("dispose", key=k, any_kind=True)


# ---- lifecycle (21.13-21.19, 21.30-21.32, 4.18) ------------------------------------------------


def test_get_or_create_across_processes(docker, engine):
    k = key("reuse")
    a = docker.ok("acquire", key=k, kind="one")["instance_id"]
    b = docker.ok("acquire", key=k, kind="one")["instance_id"]
    c = docker.ok("acquire", key=k, kind="two")["instance_id"]
    assert a == b and a != c
    names = engine.containers("label=maf-sandbox.thread=reuse")
    assert len(names) == 2 and all(n.startswith("maf-sandbox-docker-") for n in names)
    # A stopped container of that name is started, not replaced (21.18).
    engine.cli("kill", a, check=True)
    assert docker.ok("acquire", key=k, kind="one")["instance_id"] == a


def test_dispose_leaves_nothing_and_a_handle_does_not_reach_a_successor(docker, engine):
    k = key("dispose")
    first = docker.ok("acquire", key=k, kind="x")["instance_id"]
    assert docker.ok("dispose", key=k, kind="x")["failed"] is False
    assert engine.containers("label=maf-sandbox.thread=dispose") == []
    second = docker.ok("acquire", key=k, kind="x")["instance_id"]
    assert second != first
    docker.ok("dispose", key=k, any_kind=True)
    assert engine.containers("label=maf-sandbox.thread=dispose") == []
    assert docker.ok("dispose", key=k, any_kind=True)["failed"] is False  # idempotent


def test_dispose_scope_from_a_second_instance(docker, engine):
    for kind in ("a", "b"):
        docker.ok("acquire", key=key("t1", scope="purge"), kind=kind)
    docker.ok("acquire", key=key("t2", scope="purge"), kind="a")
    # A fresh process: nothing in memory, the engine's labels decide (4.18).
    assert docker.ok("dispose_scope", scope="purge", thread="t1") == {"disposed": 2,
                                                                       "undisposed": 0}
    assert engine.containers("label=maf-sandbox.scope=purge") == sorted(
        engine.containers("label=maf-sandbox.thread=t2"))
    assert len(engine.containers("label=maf-sandbox.scope=purge")) == 1
    assert docker.ok("dispose_scope", scope="purge", thread="t2")["disposed"] == 1


def test_long_label_values_are_digested_on_write_and_query(docker, engine):
    thread = "a thread id, with spaces and more than sixty-three characters in it......."
    docker.ok("acquire", key=key(thread, scope="digest"), kind="k")
    assert len(engine.containers("label=maf-sandbox.scope=digest")) == 1
    assert docker.ok("dispose_scope", scope="digest", thread=thread)["disposed"] == 1
    assert engine.containers("label=maf-sandbox.scope=digest") == []


def test_closed_egress_is_no_network(docker, engine):
    r = docker.ok("acquire", key=key("net"), kind="k")
    p = engine.cli("inspect", "-f", "{{.HostConfig.NetworkMode}}", r["instance_id"], check=True)
    assert p.stdout.strip() == "none"  # 21.20
    r = docker.ok("exec", key=key("net"), kind="k", argv=["ls", "/sys/class/net"])
    assert out(r).split() == [b"lo"]


# ---- conformance (section 18) -------------------------------------------------------------


def assert_suites_pass(doc, expected):
    got = {s["suite"]: s for s in doc["suites"]}
    assert set(got) == expected, set(got)
    for name, s in got.items():
        bad = [r for r in s["results"] if r["outcome"] == "failed"]
        assert not bad, (name, bad)
        assert s["failed"] == 0


def test_docker_passes_every_suite_it_declares(docker, engine):
    doc = docker.ok("conformance", thread="conf-docker", proc_timeout=300)
    assert_suites_pass(doc, {"FILES_IN", "FILES_OUT", "FILES_DELETE", "RECLAIM",
                             "NOTHING_LEFT_BEHIND", "EXEC"})
    nlb = [s for s in doc["suites"] if s["suite"] == "NOTHING_LEFT_BEHIND"][0]
    assert nlb["skipped"] == 0  # the engine's diff and top answer it
    assert engine.containers("label=maf-sandbox.thread=conf-docker") == []


@DOCKERD_ONLY
def test_msb_ls_lists_what_the_engine_holds(docker, wslc, engine, msb, tmp_path):
    """`msb ls --backend docker|wslc`: the engine's sandboxes read back by
    msb's labels (21.30-21.31), any process's; a stopped one as `stopped`."""
    env = dict(engine.env(), MSB_CONFIG="")
    k = key("ls-" + str(time.monotonic_ns()))
    cid = docker.ok("acquire", key=k, kind="lsk")["instance_id"]
    wcid = wslc.ok("acquire", key=k, kind="lsk")["instance_id"]
    wcfg = tmp_path / "wslc.json"
    wcfg.write_text(wslc.cfg)
    try:
        rows = {}
        for flags in (["--backend", "docker"], ["--config", str(wcfg)]):
            p, doc = msb.json("ls", *flags, "--json", env=env)
            assert p.returncode == 0, p.stderr
            mine = [r for r in doc if r["thread_id"] == k["thread"]]
            assert len(mine) == 1, doc  # the workload only, no other backend's
            rows[flags[1]] = mine[0]
        d, w = rows["docker"], rows[str(wcfg)]
        assert d["instance_id"] == cid and d["name"].startswith("maf-sandbox-docker-")
        # the CLI's listing gives the short id (`container run` the long one)
        assert wcid.startswith(w["instance_id"]) and w["name"].startswith("maf-sandbox-wslc-")
        for r in (d, w):
            assert (r["scope"], r["agent_dir"], r["kind"]) == ("e2e", "agent", "lsk"), r
            assert r["state"] == "running" and r["alive"] is True, r
            # the image and the creation time as the engine reports them
            # (the wslc fixture prints the docker CLI's "CreatedAt" text)
            assert r["image"] == IMAGE and r["age_s"] is not None and r["age_s"] >= 0, r
        engine.cli("kill", cid, check=True)
        p = msb("ls", "--backend", "docker", env=env)
        line = [ln for ln in p.stdout.decode().splitlines() if d["name"] in ln]
        assert p.returncode == 0 and len(line) == 1, p
        assert line[0].split()[1:3] == ["stopped", "docker"], line
        assert f"thread={k['thread']} agent=agent kind=lsk" in line[0]
    finally:
        docker.ok("dispose", key=k, any_kind=True)
        wslc.ok("dispose", key=k, any_kind=True)
    p, doc = msb.json("ls", "--backend", "docker", "--json", env=env)
    assert p.returncode == 0 and not [r for r in doc if r["thread_id"] == k["thread"]]


@DOCKERD_ONLY
def test_wslc_through_the_fixture(wslc, engine):
    k = key("wslc")
    decl = wslc.ok("declarations")["declarations"]
    assert set(decl["capabilities"]) == {"exec", "files_in"}  # 21.4
    r = wslc.ok("exec", key=k, argv=["sh", "-c", "printf x; exit 4"])
    assert out(r) == b"x" and r["exit_code"] == 4
    # any directory (the argv pins: tests/unit/test_engine.c); a missing one
    # runs nothing: 126 and why (issue 16)
    r = wslc.ok("exec", key=k, argv=["pwd"], wd="/no/such")
    assert r["exit_code"] == 126 and b"No such file or directory" in out(r, "stderr")
    wslc.ok("write", key=k, path="a/b.txt", data_hex=b"hi\x00".hex())
    r = wslc.ok("exec", key=k, argv=["cat", "a/b.txt"])
    assert out(r) == b"hi\x00"
    names = engine.containers("label=maf-sandbox.thread=wslc")
    assert len(names) == 1 and names[0].startswith("maf-sandbox-wslc-")
    # An allowlist is refused with the reason, never served closed (21.35).
    e = wslc("acquire", key=key("wslc-allow"), allow=["allowed.test"])["error"]
    assert e["name"] == "SandboxEgressNotEnforced" and "not implemented" in e["message"], e
    assert "an allowlist is refused" in wslc.ok("doctor")["reason"]
    assert engine.containers("label=maf-sandbox.thread=wslc-allow") == []
    e = wslc("exec", key=k, argv=["sleep", "30"], timeout=1)["error"]
    assert e["name"] == "TimeoutError"  # and the container was removed (21.26)
    assert engine.containers("label=maf-sandbox.thread=wslc") == []
    wslc.ok("acquire", key=k)
    assert wslc.ok("dispose", key=k, any_kind=True)["failed"] is False
    assert engine.containers("label=maf-sandbox.thread=wslc") == []


@DOCKERD_ONLY
def test_wslc_passes_every_suite_it_declares(wslc, engine):
    doc = wslc.ok("conformance", thread="conf-wslc", suites=["FILES_IN", "EXEC"],
                  proc_timeout=300)
    assert_suites_pass(doc, {"FILES_IN", "EXEC"})
    assert engine.containers("label=maf-sandbox.thread=conf-wslc") == []


# ---- egress: the allowlist topology (21.21-21.24, 21.33) -----------------------------------
#
# The proxies dial from the engine's outbound network (tests/e2e/dockerd.py);
# the test's servers listen on its host address, which the egress settings
# allow as the one non-global destination, and the hosts map names. The
# engine's DNS forwarder is a recorder of ours on the same address: a query
# that reaches it from a workload is a leak.

BODY = b"hello from the engine egress test\n"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def setup(self):
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(self.timeout)
            try:
                self.request.do_handshake()
            except (OSError, ssl.SSLError):
                pass
        super().setup()

    def do_GET(self):
        body = BODY
        if self.path.startswith("/big/"):
            body = bytes(i % 251 for i in range(int(self.path[5:])))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_HEAD = do_GET

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        out = hashlib.sha256(body).hexdigest().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    tls = None

    def get_request(self):
        sock, addr = self.socket.accept()
        if self.tls:
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        pass


class _DnsRecorder:
    """UDP :53 on the outbound network's host address: every query it sees."""

    def __init__(self, host):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 53))
        self.seen = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            try:
                data, addr = self.sock.recvfrom(2048)
            except OSError:
                return
            self.seen.append(data)

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def servers(engine):
    tls_dir = tempfile.mkdtemp(prefix="/tmp/msb-engine-tls-")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=tls.test", "-keyout", f"{tls_dir}/key.pem", "-out",
                    f"{tls_dir}/cert.pem"], check=True, capture_output=True)
    made = []
    for tls in (False, True):
        srv = _Server((engine.out_gateway, 0), _Handler)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(f"{tls_dir}/cert.pem", f"{tls_dir}/key.pem")
            srv.tls = ctx
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        made.append(srv)
    dns = _DnsRecorder(engine.out_gateway)
    yield {"plain": made[0].server_address[1], "tls": made[1].server_address[1], "dns": dns}
    for srv in made:
        srv.shutdown()
        srv.server_close()
    dns.close()
    shutil.rmtree(tls_dir, ignore_errors=True)


def egress_backend(engine, tmp_path, hosts=None, **extra):
    gw = engine.out_gateway
    h = {"allowed.test": [gw], "other.test": [gw], "get-only.test": [gw], "tls.test": [gw],
         "meta.test": ["169.254.169.254"], "mixed.test": [gw, "169.254.169.254"]}
    h.update(hosts or {})
    eg = {"allow_cidrs": [gw + "/32"], "hosts": h, "system_resolver": False}
    eg.update(extra)
    cfg = {"type": "docker", "host": engine.host, "image": TOOLS_IMAGE,
           "egress_proxy_image": "msb-test-proxy", "egress_network": engine.out_network,
           "egress_proxy": PROXY, "egress": eg}
    path = tmp_path / f"docker-egress-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(cfg))
    return str(path), cfg


def egress_run(msb, engine, cfg, code, *args, allow=("allowed.test", "tls.test"), verb="run",
               thread=None, timeout=180):
    events = f"/tmp/msb-engine-events-{time.monotonic_ns()}.jsonl"
    flags = ["--config", cfg, "--min-isolation", "container", "--events", events]
    for a in allow:
        flags += ["--allow", a]
    if thread:
        flags += ["--thread", thread]
    p = msb(verb, *flags, "--", "python3", "-c", code, *args, timeout=timeout, env=engine.env())
    evs = []
    if os.path.exists(events):
        with open(events) as f:
            evs = [json.loads(line) for line in f if line.strip()]
        os.unlink(events)
    return p, [e for e in evs if e["event"] == "EgressObserved"]


GUEST_GET = r"""
import json, os, ssl, sys, urllib.request
out = {"env": {k: os.environ.get(k) for k in ("HTTP_PROXY", "https_proxy", "NO_PROXY")}}
def get(url, method="GET", data=None):
    req = urllib.request.Request(url, method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=20,
                                    context=ssl._create_unverified_context()) as r:
            return [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode()]
    except Exception as e:
        return [0, repr(e)]
for name, method, url in json.loads(sys.argv[1]):
    out[name] = get(url, method, b"payload" if method == "POST" else None)
print(json.dumps(out))
"""


@DOCKERD_ONLY
def test_egress_declarations_with_the_proxy(engine, tmp_path):
    cfg, doc = egress_backend(engine, tmp_path)
    b = Backend(engine, doc)
    dd = b.ok("declarations")["declarations"]
    assert sorted(dd["egress_modes"]) == ["allowlist", "closed"]  # 21.5, 22.4
    assert "GET" in dd["egress_method_tokens"] and dd["observes_egress"] is True
    d = b.ok("doctor")
    assert d["ok"] and "allowlist" in d["reason"] and "msb-test-proxy" in d["reason"]
    # The proxy image is msb's one-file image, imported, never pulled.
    tags = engine.cli("images", "--format", "{{.Repository}}:{{.Tag}}", check=True).stdout
    assert any(t.startswith("msb-test-proxy:") for t in tags.split())
    files = engine.cli("image", "inspect", "-f", "{{len .RootFS.Layers}}",
                       [t for t in tags.split() if t.startswith("msb-test-proxy:")][0]).stdout
    assert files.strip() == "1"


@PODMAN_ONLY
def test_egress_allowlist_refused_on_podman(engine):
    """podman 4.3 with CNI cannot hold the topology (docs/engine.md): with a
    proxy image configured the backend declares egress closed only, says
    why in doctor and refuses an allowlist at acquire - nothing imported,
    no network made."""
    b = Backend(engine, {"type": "docker", "host": engine.host, "image": IMAGE,
                         "egress_proxy_image": "msb-test-proxy", "egress_proxy": PROXY})
    dd = b.ok("declarations")["declarations"]
    assert dd["egress_modes"] == ["closed"] and dd["observes_egress"] is False  # 21.5
    d = b.ok("doctor")
    assert d["ok"] is False and "an allowlist is refused (podman with" in d["reason"], d
    e = b("acquire", key=key("pm-allow"), allow=["allowed.test"])["error"]
    assert e["name"] == "SandboxEgressNotEnforced" and "podman with" in e["message"], e
    assert engine.containers("label=maf-sandbox.thread=pm-allow") == []
    assert engine.cli("network", "ls", "-q", "--filter", "label=maf-sandbox.thread=pm-allow",
                      check=True).stdout.split() == []
    tags = engine.cli("images", "--format", "{{.Repository}}", check=True).stdout.split()
    assert not any("msb-test-proxy" in t for t in tags), tags


@DOCKERD_ONLY
def test_egress_allowed_refused_and_observed(msb, engine, servers, tmp_path):
    cfg, _ = egress_backend(engine, tmp_path)
    port, tls = servers["plain"], servers["tls"]
    reqs = [("allowed", "GET", f"http://allowed.test:{port}/x"),
            ("unlisted", "GET", f"http://other.test:{port}/x"),
            ("tls", "GET", f"https://tls.test:{tls}/y"),
            ("post", "POST", f"http://get-only.test:{port}/"),
            ("get", "GET", f"http://get-only.test:{port}/")]
    p, evs = egress_run(msb, engine, cfg, GUEST_GET, json.dumps(reqs),
                        allow=("allowed.test", "tls.test", "get-only.test=GET,HEAD"))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    proxy = out["env"]["HTTP_PROXY"]
    assert proxy.startswith("http://maf-sandbox-docker-") and proxy.endswith("-proxy:3128")
    assert out["env"]["https_proxy"] == proxy and "127.0.0.1" in out["env"]["NO_PROXY"]
    assert out["allowed"] == [200, BODY.decode()]
    assert out["unlisted"][0] == 403 and "not-allowlisted" in out["unlisted"][1]
    assert out["tls"] == [200, BODY.decode()]
    assert out["get"][0] == 200  # per-method rules on plain HTTP, as ns serves them
    assert out["post"][0] == 403 and "method-not-allowed" in out["post"][1]
    got = sorted((e["host"], e["decision"], e["reason"], e["method"]) for e in evs)
    assert got == [("allowed.test", "ALLOW", "allowlisted", "GET"),
                   ("get-only.test", "ALLOW", "allowlisted", "GET"),
                   ("get-only.test", "DENY", "method-not-allowed", "POST"),
                   ("other.test", "DENY", "not-allowlisted", "GET"),
                   ("tls.test", "ALLOW", "allowlisted", None)], evs  # 21.33
    by = {(e["host"], e["method"]): e for e in evs}
    assert by[("tls.test", None)]["bytes_down"] > 0 and by[("tls.test", None)]["port"] == tls
    assert all(e["key"]["scope"] == "cli" for e in evs)
    # `msb run` disposed it all: workload, proxy, network.
    assert engine.containers("label=maf-sandbox.scope=cli") == []
    assert engine.cli("network", "ls", "-q", "--filter", "label=maf-sandbox.scope=cli",
                      check=True).stdout.split() == []


@DOCKERD_ONLY
def test_egress_bulk_bytes_intact_both_ways(msb, engine, servers, tmp_path):
    cfg, _ = egress_backend(engine, tmp_path)
    code = ("import hashlib, json, ssl, sys, urllib.request\n"
            "p, t = int(sys.argv[1]), int(sys.argv[2])\n"
            "ctx = ssl._create_unverified_context()\n"
            "out = {}\n"
            "for n, u in (('plain', f'http://allowed.test:{p}/big/8388608'),\n"
            "             ('tls', f'https://tls.test:{t}/big/8388608')):\n"
            "    out[n] = hashlib.sha256(urllib.request.urlopen(u, timeout=60, context=ctx)"
            ".read()).hexdigest()\n"
            "body = bytes((i * 7) % 256 for i in range(3 << 20))\n"
            "r = urllib.request.urlopen(urllib.request.Request(f'http://allowed.test:{p}/',"
            " data=body, method='POST'), timeout=60)\n"
            "out['up'] = [r.read().decode(), hashlib.sha256(body).hexdigest()]\n"
            "print(json.dumps(out))\n")
    p, evs = egress_run(msb, engine, cfg, code, str(servers["plain"]), str(servers["tls"]))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    want = hashlib.sha256(bytes(i % 251 for i in range(8 << 20))).hexdigest()
    assert out["plain"] == want and out["tls"] == want
    assert out["up"][0] == out["up"][1]
    assert any(e["method"] == "POST" and e["bytes_up"] > 3 << 20 for e in evs)


@DOCKERD_ONLY
def test_egress_conformance_suite(msb, engine, servers, tmp_path):
    cfg, _ = egress_backend(engine, tmp_path)
    port = servers["plain"]
    p, doc = msb.json("conformance", "docker", "--config", cfg, "--suite", "egress",
                      "--allowed-url", f"http://allowed.test:{port}/",
                      "--denied-url", f"http://other.test:{port}/", "--json",
                      timeout=300, env=engine.env())
    assert p.returncode == 0, (p.stdout, p.stderr)
    (suite,) = doc["suites"]
    assert suite["suite"] == "EGRESS" and suite["ran"] and suite["failed"] == 0
    assert [r["outcome"] for r in suite["results"]] == ["passed", "passed"], suite
    assert engine.containers("label=maf-sandbox.scope=conformance") == []


ATTACKS = r"""
import errno, json, os, socket, sys, time
port, tls_port, gw, out_ip, nb_ip, sock_path = sys.argv[1:7]
port, tls_port = int(port), int(tls_port)
proxy_host = os.environ["HTTP_PROXY"].split("//")[1].split(":")[0]
out = {}

def attempt(name, fn):
    try:
        out[name] = ["reached", fn()]
    except OSError as e:
        out[name] = ["refused", errno.errorcode.get(e.errno, str(e.errno)) if e.errno else repr(e)]
    except Exception as e:
        out[name] = ["refused", repr(e)]

def tcp(host, p, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect((host, p))
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    data = s.recv(100)
    s.close()
    return data.decode(errors="replace")

attempt("tcp_ip", lambda: tcp("93.184.216.34", 80))
attempt("tcp_gateway_port", lambda: tcp(gw, port))
attempt("tcp_proxy_outbound_leg", lambda: tcp(out_ip, 3128))
attempt("tcp_neighbour_proxy", lambda: tcp(nb_ip, 3128))
attempt("tcp_ipv6", lambda: tcp("2606:4700:4700::1111", 80, socket.AF_INET6))

def udp(host, p):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(b"x", (host, p))
    return s.recvfrom(100)[0].hex()
attempt("udp", lambda: udp("8.8.8.8", 53))
attempt("udp_gateway", lambda: udp(gw, 53))

def dns():
    return str(socket.getaddrinfo("exfil-msb-leak.example.com", 80))
attempt("dns", dns)

def raw():
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    return "raw socket opened"
attempt("raw", raw)

def packet():
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0x0300)
    return "packet socket opened"
attempt("packet", packet)

def engine_socket():
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    return "connected"
attempt("engine_socket", engine_socket)

def proxy(request, wait=10):
    s = socket.create_connection((proxy_host, 3128), timeout=wait)
    s.sendall(request)
    data = b""
    while True:
        try:
            chunk = s.recv(4096)
        except socket.timeout:
            break
        if not chunk:
            break
        data += chunk
        if data.startswith(b"HTTP/1.1 200 Connection established\r\n\r\n"):
            break
    s.close()
    return data.decode(errors="replace").split("\r\n")[0]

attempt("connect_gateway_literal", lambda: proxy(b"CONNECT %s:%d HTTP/1.1\r\n\r\n" % (gw.encode(), tls_port)))
attempt("connect_neighbour_literal", lambda: proxy(b"CONNECT %s:3128 HTTP/1.1\r\n\r\n" % nb_ip.encode()))
attempt("name_to_neighbour", lambda: proxy(b"CONNECT neighbour.test:3128 HTTP/1.1\r\n\r\n"))
attempt("name_to_metadata", lambda: proxy(b"CONNECT meta.test:80 HTTP/1.1\r\n\r\n"))
attempt("name_mixed_addresses", lambda: proxy(b"CONNECT mixed.test:%d HTTP/1.1\r\n\r\n" % port))
attempt("host_mismatch", lambda: proxy(
    b"GET http://allowed.test:%d/ HTTP/1.1\r\nHost: other.test:%d\r\n\r\n" % (port, port)))
attempt("duplicate_content_length", lambda: proxy(
    b"POST http://allowed.test:%d/ HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\nabcd" % port))
attempt("content_length_and_te", lambda: proxy(
    b"POST http://allowed.test:%d/ HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" % port))
attempt("long_header_line", lambda: proxy(
    b"GET http://allowed.test:%d/ HTTP/1.1\r\nX-Long: " % port + b"a" * 20000 + b"\r\n\r\n"))
attempt("origin_form", lambda: proxy(b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"))
attempt("pipelined", lambda: proxy(
    b"GET http://allowed.test:%d/a HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
    b"GET http://other.test:%d/b HTTP/1.1\r\nHost: other.test:%d\r\n\r\n" % (port, port, port, port)))

def slowloris():
    t0 = time.monotonic()
    s = socket.create_connection((proxy_host, 3128), timeout=30)
    s.sendall(b"CONNECT allowed.test:%d HTTP/1.1\r\n" % port)
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return [data.decode(errors="replace").split("\r\n")[0], round(time.monotonic() - t0, 2)]
attempt("slowloris", slowloris)
print(json.dumps(out))
"""


def proxy_ips(engine, thread):
    """The proxy of the sandbox of this thread: {network: address}."""
    (name,) = [n for n in engine.containers(f"label=maf-sandbox.thread={thread}",
                                            "label=maf-sandbox.role=proxy")]
    doc = json.loads(engine.cli("inspect", name, check=True).stdout)[0]
    return {k: v["IPAddress"] for k, v in doc["NetworkSettings"]["Networks"].items()}


@pytest.fixture(scope="module")
def attacks(msb, engine, servers, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attacks")
    # The neighbour: another allowlisted sandbox, its proxy on its own network.
    ncfg, _ = egress_backend(engine, tmp)
    p, _ = egress_run(msb, engine, ncfg, "print('n')", verb="exec", thread="egress-nb")
    assert p.returncode == 0, p.stderr
    nb = proxy_ips(engine, "egress-nb")
    nb_internal = [ip for net, ip in nb.items() if net != engine.out_network][0]
    nb_outbound = nb[engine.out_network]
    cfg, _ = egress_backend(engine, tmp, hosts={"neighbour.test": [nb_outbound]},
                            header_timeout_ms=1500)
    p, _ = egress_run(msb, engine, cfg, "print('warm')", verb="exec", thread="egress-attack")
    assert p.returncode == 0, p.stderr
    own_outbound = proxy_ips(engine, "egress-attack")[engine.out_network]
    before = len(servers["dns"].seen)
    p, evs = egress_run(msb, engine, cfg, ATTACKS, str(servers["plain"]), str(servers["tls"]),
                        engine.out_gateway, own_outbound, nb_internal, engine.sock,
                        verb="exec", thread="egress-attack",
                        allow=("allowed.test", "meta.test", "mixed.test", "neighbour.test",
                               engine.out_gateway, nb_outbound))
    assert p.returncode == 0, p.stderr
    leaked_dns = [q for q in servers["dns"].seen[before:] if b"exfil-msb-leak" in q]
    for thread in ("egress-attack", "egress-nb"):
        assert msb("dispose", "--backend", "docker", "--scope", "cli", "--agent", "cli",
                   "--thread", thread, env=engine.env()).returncode == 0
    yield json.loads(p.stdout), evs, leaked_dns


@DOCKERD_ONLY
@pytest.mark.parametrize("name", ["tcp_ip", "tcp_gateway_port", "tcp_proxy_outbound_leg",
                                  "tcp_neighbour_proxy", "tcp_ipv6", "udp", "udp_gateway",
                                  "dns", "raw", "packet", "engine_socket"])
def test_egress_no_way_out_but_the_proxy(attacks, name):
    out, _, _ = attacks
    verdict, detail = out[name]
    assert verdict == "refused", f"{name} got out: {detail}"


@DOCKERD_ONLY
def test_egress_dns_never_leaves_the_sandbox(attacks):
    _, _, leaked = attacks
    # The engine's DNS forwarder is our recorder: the workload's query for a
    # name of its choosing never reached it (no DNS exfiltration).
    assert leaked == []


@pytest.mark.parametrize("name,status,reason", [
    ("connect_neighbour_literal", "403", "private"),
    ("name_to_neighbour", "403", "private"),
    ("name_to_metadata", "403", "cloud-metadata"),
    ("name_mixed_addresses", "403", "cloud-metadata"),
    ("host_mismatch", "400", "host-mismatch"),
    ("duplicate_content_length", "400", "duplicate-content-length"),
    ("content_length_and_te", "400", "content-length-with-transfer-encoding"),
    ("long_header_line", "431", "line-too-long"),
    ("origin_form", "400", "origin-form"),
    ("slowloris", "408", "header-timeout"),
])
@DOCKERD_ONLY
def test_egress_proxy_refuses_and_records(attacks, name, status, reason):
    out, evs, _ = attacks
    verdict, detail = out[name]
    assert verdict == "reached", detail
    line = detail[0] if isinstance(detail, list) else detail
    assert line.startswith(f"HTTP/1.1 {status}"), detail
    assert any(e["decision"] == "DENY" and e["reason"] == reason for e in evs), evs


@DOCKERD_ONLY
def test_egress_literal_only_when_listed_and_one_request_per_connection(attacks):
    out, evs, _ = attacks
    # The gateway's address is on this allowlist as a literal (and in
    # allow_cidrs): served. Another sandbox's proxy, listed too, is not global.
    assert out["connect_gateway_literal"][1].startswith("HTTP/1.1 200"), out
    assert out["pipelined"][1].startswith("HTTP/1.1 200")
    assert not any(e["host"] == "other.test" and e["decision"] == "ALLOW" for e in evs)
    assert 1.0 <= out["slowloris"][1][1] < 10


@DOCKERD_ONLY
def test_egress_scaffolding_reensured_and_disposed(engine, servers, tmp_path):
    _, doc = egress_backend(engine, tmp_path)
    b = Backend(engine, doc)
    k = key("scaffold")
    first = b.ok("acquire", key=k, allow=["allowed.test"])["instance_id"]
    pname = [n for n in engine.containers("label=maf-sandbox.thread=scaffold",
                                          "label=maf-sandbox.role=proxy")]
    assert len(pname) == 1 and pname[0].endswith("-proxy")
    pid1 = engine.cli("inspect", "-f", "{{.Id}}", pname[0], check=True).stdout.strip()
    # A warm acquire keeps the running proxy (its tunnels stay up) ...
    assert b.ok("acquire", key=k, allow=["allowed.test"])["instance_id"] == first
    assert engine.cli("inspect", "-f", "{{.Id}}", pname[0]).stdout.strip() == pid1
    # ... and replaces a dead one (21.22).
    engine.cli("kill", pname[0], check=True)
    assert b.ok("acquire", key=k, allow=["allowed.test"])["instance_id"] == first
    pid2 = engine.cli("inspect", "-f", "{{.Id}} {{.State.Running}}", pname[0]).stdout.split()
    assert pid2[0] != pid1 and pid2[1] == "true"
    r = b.ok("exec", key=k, allow=["allowed.test"],
             argv=["python3", "-c", "import urllib.request as u; print(u.urlopen("
                   f"'http://allowed.test:{servers['plain']}/').status)"])
    assert out(r) == b"200\n", r
    # An allowlist of nobody is closed: no network, no proxy (21.23).
    r = b.ok("acquire", key=k, kind="closed", allow=[])
    mode = engine.cli("inspect", "-f", "{{.HostConfig.NetworkMode}}", r["instance_id"]).stdout
    assert mode.strip() == "none"
    nets = engine.cli("network", "ls", "-q", "--filter", "label=maf-sandbox.thread=scaffold",
                      check=True).stdout.split()
    assert len(nets) == 1
    bridges = engine.bridges()
    assert any(br == "br-" + engine.cli("network", "inspect", "-f", "{{.Id}}", nets[0])
               .stdout.strip()[:12] for br in bridges)
    # The internal network has no host address (inhibit_ipv4).
    br = "br-" + engine.cli("network", "inspect", "-f", "{{.Id}}", nets[0]).stdout.strip()[:12]
    assert "inet " not in subprocess.run(["ip", "-4", "addr", "show", br],
                                        capture_output=True, text=True).stdout
    # Dispose: workloads, then the proxy, then the network; nothing is left.
    assert b.ok("dispose", key=k, any_kind=True)["failed"] is False
    assert engine.containers("label=maf-sandbox.thread=scaffold") == []
    assert engine.cli("network", "ls", "-q", "--filter", "label=maf-sandbox.thread=scaffold",
                      check=True).stdout.split() == []
    assert not os.path.exists(f"/sys/class/net/{br}")


# ---- the CLI: --backend, --image, conformance and the escape suite (issue 19) ------------------


@DOCKERD_ONLY
def test_cli_run_exec_and_purge_with_backend_docker(msb, engine):
    env = engine.env()
    flags = ["--backend", "docker", "--image", IMAGE]
    p = msb("run", *flags, "--min-isolation", "container", "--", "sh", "-c", "echo hi; exit 3",
            env=env)
    assert p.stdout == b"hi\n" and p.returncode == 3, p.stderr
    # `msb run` asks for the call scope only where it is served; docker's
    # container of that run is gone afterwards either way.
    assert engine.containers("label=maf-sandbox.scope=cli") == []
    p = msb("run", *flags, "--", "true", env=env)
    assert p.returncode != 0 and b"--min-isolation container" in p.stderr
    p = msb("exec", *flags, "--min-isolation", "container", "--thread", "cli-t", "--",
            "sh", "-c", "echo warm > f; cat f", env=env)
    assert p.stdout == b"warm\n", p.stderr
    assert len(engine.containers("label=maf-sandbox.thread=cli-t")) == 1
    p = msb("purge", "--backend", "docker", "--scope", "cli", "--thread", "cli-t", env=env)
    assert p.returncode == 0, p.stderr
    assert engine.containers("label=maf-sandbox.thread=cli-t") == []


@DOCKERD_ONLY
def test_cli_conformance_with_a_config_file(msb, engine, write_json):
    cfg = write_json("docker.json", {"type": "docker", "host": engine.host, "image": IMAGE})
    p, doc = msb.json("conformance", "docker", "--config", cfg, "--suite", "files_in",
                      "--suite", "exec", "--json", timeout=300)
    assert p.returncode == 0, p.stderr
    assert doc["failed"] == 0 and doc["passed"] > 10


@DOCKERD_ONLY
def test_escape_suite_in_a_docker_container(msb, engine):
    """The escape suite against docker, judged by the expectations stated for
    docker (cli/cmd_escape.c, docs/security.md "Container engines")."""
    p, doc = msb.json("conformance", "--escape", "docker", "--image", IMAGE, "--json",
                      timeout=300, env=engine.env())
    rows = {r["probe"]: r for r in doc["probes"]}
    bad = [r for r in doc["probes"] if not r["ok"]]
    assert p.returncode == 0 and not bad, bad
    # What msb adds to the engine's defaults holds: no raw or packet sockets,
    # no chroot or device nodes, no_new_privs, no network, no engine socket.
    for name in ("raw-socket", "packet-socket", "chroot-out", "mknod-block-device",
                 "no-new-privs", "outbound-tcp", "shim-socket", "read-other-sandbox",
                 "pid1-is-own-agent", "fill-memory", "fork-bomb", "fill-dev-shm"):
        assert rows[name]["outcome"] in ("blocked", "contained"), rows[name]
    assert "/merged/" in rows["read-other-sandbox"]["detail"]
    assert engine.containers("label=maf-sandbox.scope=conformance") == []


# ---- the engine dies mid-exec (last: it restarts the engine) --------------------------------


def test_engine_killed_mid_exec_is_a_typed_error_and_recovers(docker, engine):
    k = key("crash")
    docker.ok("acquire", key=k)
    result = {}

    def run():
        result["doc"] = docker("exec", key=k, argv=["sleep", "60"], timeout=120)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(1.5)
    t0 = time.monotonic()
    engine.kill()
    t.join(60)
    assert not t.is_alive()
    assert time.monotonic() - t0 < 30
    e = result["doc"]["error"]
    assert e["name"] == "OSError" and "not reachable" in e["message"], e
    # Down: a typed refusal, at once.
    e = docker("acquire", key=k)["error"]
    assert e["name"] == "OSError"
    # Back: the same socket answers again (a fresh engine: this VM's
    # containerd does not come back over the old state, see
    # docs/internals/engine.md) and the backend serves at once.
    engine.reap_leftovers()
    engine.reset_state()
    engine.start()
    engine.import_image()
    r = docker.ok("exec", key=k, argv=["echo", "back"])
    assert out(r) == b"back\n"
    docker.ok("dispose", key=k, any_kind=True)
    assert engine.containers("label=maf-sandbox.thread=crash") == []
