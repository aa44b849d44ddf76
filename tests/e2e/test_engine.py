"""The `docker` and `wslc` backends against a real, private dockerd (issue 19).

Checklist section 21 and 22.1-22.7. Every operation runs through
build/tests/engine/msb-engine-tool, one process each, so get-or-create and
disposal are exercised across processes (the name from the key, the labels
the engine reports). The wslc backend runs its real argv through
tests/fixtures/wslc, a stand-in that renames the contract onto the docker
CLI. Needs root and docker.io (scripts/install-deps).
"""
import json
import os
import subprocess
import threading
import time

import pytest

from conftest import BUILD, ROOT
from dockerd import IMAGE, PrivateDockerd

TOOL = os.path.join(BUILD, "tests", "engine", "msb-engine-tool")
WSLC = os.path.join(ROOT, "tests", "fixtures", "wslc")


@pytest.fixture(scope="module")
def engine():
    if os.geteuid() != 0:
        pytest.fail("the engine tests need root to run a private dockerd")
    d = PrivateDockerd()
    try:
        d.start()
        d.import_image()
        yield d
    finally:
        d.cleanup()


class Backend:
    def __init__(self, engine, cfg):
        self.engine = engine
        self.cfg = json.dumps(cfg)

    def __call__(self, op, proc_timeout=180, **req):
        req["op"] = op
        p = subprocess.run([TOOL, self.cfg, json.dumps(req)], capture_output=True,
                           timeout=proc_timeout, env=self.engine.env())
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
def wslc(engine):
    return Backend(engine, {"type": "wslc", "wslc_path": WSLC, "image": IMAGE,
                            "command_timeout": 60})


def key(thread, scope="e2e", agent="agent"):
    return {"scope": scope, "thread": thread, "agent": agent}


def out(doc, stream="stdout"):
    return bytes.fromhex(doc[stream])


# ---- declarations and doctor (22.1-22.6) -------------------------------------------------


def test_doctor_and_declarations(docker):
    d = docker.ok("doctor")
    assert d["ok"] and "API 1." in d["reason"] and "tar-header walk" in d["reason"]
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
    e = docker("exec", key=k, argv=["pwd"], wd="../../etc")["error"]
    assert e["name"] == "ValueError"
    # A large output arrives whole, and exec_bounded stops at its budget.
    r = docker.ok("exec", key=k, argv=["head", "-c", "3000000", "/dev/zero"])
    assert len(out(r)) == 3000000
    r = docker.ok("exec_bounded", key=k, argv=["head", "-c", "100000", "/dev/zero"],
                  max_output=1000)
    assert len(out(r)) == 1000 and r["truncated"] is True and r["exit_code"] == 0


def test_exec_timeout_kills_the_process_group(docker):
    k = key("timeout")
    t0 = time.monotonic()
    e = docker("exec", key=k, argv=["sh", "-c", "sleep 300 & sleep 301"], timeout=1)["error"]
    assert e["name"] == "TimeoutError" and "process group was killed" in e["message"]
    assert time.monotonic() - t0 < 10
    # Nothing of it is left, and the sandbox still serves.
    r = docker.ok("exec", key=k, argv=["ps", "-o", "args"])
    assert b"sleep 30" not in out(r), out(r)


# ---- files (22.7) --------------------------------------------------------------------------


def test_files_in_and_out(docker, tmp_path):
    k = key("files")
    blob = os.urandom(1 << 20)
    src = tmp_path / "blob"
    src.write_bytes(blob)
    docker.ok("write", key=k, path="deep/er/blob.bin", file=str(src))
    r = docker.ok("exec", key=k, argv=["sha256sum", "deep/er/blob.bin"])
    import hashlib
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


def test_links_are_refused_never_followed(docker):
    k = key("links")
    docker.ok("exec", key=k, argv=["sh", "-c",
                                   "mkdir -p /outside && echo secret > /outside/s && "
                                   "ln -s /outside out && ln -s /outside/s leaf"])
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


def test_wslc_through_the_fixture(wslc, engine):
    k = key("wslc")
    decl = wslc.ok("declarations")["declarations"]
    assert set(decl["capabilities"]) == {"exec", "files_in"}  # 21.4
    r = wslc.ok("exec", key=k, argv=["sh", "-c", "printf x; exit 4"])
    assert out(r) == b"x" and r["exit_code"] == 4
    wslc.ok("write", key=k, path="a/b.txt", data_hex=b"hi\x00".hex())
    r = wslc.ok("exec", key=k, argv=["cat", "a/b.txt"])
    assert out(r) == b"hi\x00"
    names = engine.containers("label=maf-sandbox.thread=wslc")
    assert len(names) == 1 and names[0].startswith("maf-sandbox-wslc-")
    e = wslc("exec", key=k, argv=["sleep", "30"], timeout=1)["error"]
    assert e["name"] == "TimeoutError"  # and the container was removed (21.26)
    assert engine.containers("label=maf-sandbox.thread=wslc") == []
    wslc.ok("acquire", key=k)
    assert wslc.ok("dispose", key=k, any_kind=True)["failed"] is False
    assert engine.containers("label=maf-sandbox.thread=wslc") == []


def test_wslc_passes_every_suite_it_declares(wslc, engine):
    doc = wslc.ok("conformance", thread="conf-wslc", suites=["FILES_IN", "EXEC"],
                  proc_timeout=300)
    assert_suites_pass(doc, {"FILES_IN", "EXEC"})
    assert engine.containers("label=maf-sandbox.thread=conf-wslc") == []


# ---- the CLI: --backend, --image, conformance and the escape suite (issue 19) ------------------


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


def test_cli_conformance_with_a_config_file(msb, engine, write_json):
    cfg = write_json("docker.json", {"type": "docker", "host": engine.host, "image": IMAGE})
    p, doc = msb.json("conformance", "docker", "--config", cfg, "--suite", "files_in",
                      "--suite", "exec", "--json", timeout=300)
    assert p.returncode == 0, p.stderr
    assert doc["failed"] == 0 and doc["passed"] > 10


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
