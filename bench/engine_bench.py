#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The docker and wslc backends beside the docker CLI, in one run (issue 19).

    bench/engine_bench.py [--build DIR] [-n N] [--json OUT]

Needs root and docker.io: it starts a private dockerd (tests/e2e/dockerd.py:
own data root and socket, no network) and imports a busybox image. Measures,
N times each, and reports medians and ratios:

  acquire       a new sandbox: msb-engine-tool acquire (one process: backend
                construction with GET /version, then get-or-create) beside
                `docker run -d --network none IMAGE sleep infinity`
  exec true     /bin/true in a warm container: the docker backend's exec in a
                warm process on its kept agent stream (msb-agent --engine,
                started by the handle's first exec; each exec is then frames
                on it), and a whole msb-engine-tool process (which starts its
                own stream), beside `docker exec C true`
  exec true (engine exec)  the same with the stream off (MSB_ENGINE_KEPT=0):
                one engine exec per call (create + hijacked start + inspect)
  64 MiB write  the backend's write_file beside `docker cp FILE C:/PATH`: with
                the confined agent (one exec of msb-agent, the bytes on its
                stdin) and with the tar-header walk (stats + archive PUT)
  64 MiB read   read_file the same two ways beside `docker cp C:/PATH FILE`
  4 KiB read    a small file, both ways, beside `docker cp`
  (host)        the same files through the host's file plane (the default
                on a local engine: the container's root from /proc/PID/root,
                no engine call but the PID's inspect)
  wslc exec     the wslc backend's exec through tests/fixtures/wslc beside the
                `docker exec` it becomes: the CLI contract's overhead
  acquire allowlist  a new sandbox with the allowlist topology (internal
                network, msb's proxy started and waited for, its outbound leg,
                the workload) beside the same with the docker CLI (`network
                create --internal`, `run` the proxy, poll `logs` for its
                "listening", `network connect`, `run` the workload)
  acquire allowlist, warm  the same key again: the proxy kept
  stream probe  (the transport of docs/engine.md "The targets",
                measured alone; msb's exec rides such a stream with its own
                protocol, its files do not): one exec started once
                on a hijacked, multiplexed stream (busybox sh reading one
                command line at a time) and then a request/answer round trip
                over it (`e` -> "e"), 64 MiB sent into a file (`w` -> head -c
                into /tmp/f, "ok") and 64 MiB read back (`r` -> cat), beside
                `docker exec` and `docker cp`; and the same 64 MiB written and
                read by the host through the container's root
                (/proc/PID/root, a local engine's). `--stream-only` runs just
                these.
  `--files-only` runs just the 64 MiB write and read on the host's file
  plane beside `docker cp`, interleaved.

The in-process figures come from the tool's own clock around the library
call; the CLI figures are wall-clock times of the docker command.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from dockerd import IMAGE, PrivateDockerd  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("-n", type=int, default=15)
    ap.add_argument("--json")
    ap.add_argument("--stream-only", action="store_true")
    ap.add_argument("--files-only", action="store_true")
    a = ap.parse_args()
    tool = os.path.join(a.build, "tests", "engine", "msb-engine-tool")
    d = PrivateDockerd()
    try:
        d.start()
        d.import_image()
        if a.stream_only:
            res = run_stream(d, a.n)
        elif a.files_only:
            res = run_files(d, tool, a.n)
        else:
            d.with_egress()
            res = run(d, tool, a.n)
            res.update(run_egress(d, tool, os.path.join(a.build, "proxy", "msb-egress-proxy"),
                                  a.n))
            res.update(run_stream(d, a.n))
    finally:
        d.cleanup()
    report(res, a.n)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


def timed(argv, env, **kw):
    t = time.monotonic()
    p = subprocess.run(argv, capture_output=True, env=env, **kw)
    dt = time.monotonic() - t
    assert p.returncode == 0, (argv, p.stdout, p.stderr)
    return dt, p


def run(d, tool, n):
    # the walk; the confined agent; the host's file plane (the default)
    env = dict(d.env(), MSB_AGENT="/nonexistent/msb-agent", MSB_ENGINE_HOSTFS="0")
    henv = dict(d.env(), MSB_AGENT=os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(tool))), "agent", "msb-agent"))
    aenv = dict(henv, MSB_ENGINE_HOSTFS="0")
    cfg = json.dumps({"type": "docker", "host": d.host, "image": IMAGE})
    wcfg = json.dumps({"type": "wslc", "wslc_path": os.path.join(ROOT, "tests", "fixtures",
                                                                  "wslc"), "image": IMAGE})

    def t(req, c=cfg, e=env):
        dt, p = timed([tool, c, json.dumps(req)], e)
        doc = json.loads(p.stdout)
        assert "error" not in doc, doc
        return dt, doc

    r = {k: [] for k in ("acquire_tool_wall", "acquire_lib", "docker_run", "exec_lib",
                         "exec_tool_wall", "docker_exec", "exec_engine_lib", "write_lib", "docker_cp_in",
                         "read_lib", "docker_cp_out", "wslc_exec_lib", "wslc_exec_wall",
                         "write_agent", "read_agent", "small_walk", "small_agent",
                         "docker_cp_small", "write_host", "read_host", "small_host",
                         "write_host_wall", "read_host_wall")}
    for i in range(n):
        wall, doc = t({"op": "acquire", "key": {"scope": "bench", "thread": f"a{i}", "agent": "b"}})
        r["acquire_tool_wall"].append(wall)
        r["acquire_lib"].append(doc["acquire_s"])
        dt, _ = timed([d.docker, "run", "-d", "--network", "none", "--name", f"peer{i}", IMAGE,
                       "sleep", "infinity"], env)
        r["docker_run"].append(dt)
    k = {"scope": "bench", "thread": "warm", "agent": "b"}
    _, doc = t({"op": "acquire", "key": k})
    cid = doc["instance_id"]
    _, doc = t({"op": "exec", "key": k, "argv": ["true"], "repeat": n + 2}, e=henv)
    r["exec_lib"] = doc["times"][2:]
    _, doc = t({"op": "exec", "key": k, "argv": ["true"], "repeat": n + 2},
               e=dict(henv, MSB_ENGINE_KEPT="0"))
    r["exec_engine_lib"] = doc["times"][2:]
    for _ in range(n):
        wall, _ = t({"op": "exec", "key": k, "argv": ["true"]}, e=henv)
        r["exec_tool_wall"].append(wall)
        dt, _ = timed([d.docker, "exec", cid, "true"], env)
        r["docker_exec"].append(dt)
    blob = os.path.join(d.dir, "blob")
    with open(blob, "wb") as f:
        f.write(os.urandom(64 << 20))
    back = os.path.join(d.dir, "back")
    for i in range(n):
        _, doc = t({"op": "write", "key": k, "path": "blob.bin", "file": blob})
        r["write_lib"].append(doc["time_s"])
        _, doc = t({"op": "read", "key": k, "path": "blob.bin", "out": back})
        r["read_lib"].append(doc["time_s"])
        dt, _ = timed([d.docker, "cp", blob, f"{cid}:/maf-sandbox/work/peer.bin"], env)
        r["docker_cp_in"].append(dt)
        dt, _ = timed([d.docker, "cp", f"{cid}:/maf-sandbox/work/peer.bin", back], env)
        r["docker_cp_out"].append(dt)
        _, doc = t({"op": "write", "key": k, "path": "blob.bin", "file": blob}, e=aenv)
        r["write_agent"].append(doc["time_s"])
        _, doc = t({"op": "read", "key": k, "path": "blob.bin", "out": back}, e=aenv)
        r["read_agent"].append(doc["time_s"])
        wall, doc = t({"op": "write", "key": k, "path": "blob.bin", "file": blob}, e=henv)
        r["write_host"].append(doc["time_s"])
        r["write_host_wall"].append(wall)
        wall, doc = t({"op": "read", "key": k, "path": "blob.bin", "out": back}, e=henv)
        r["read_host"].append(doc["time_s"])
        r["read_host_wall"].append(wall)
    small = os.path.join(d.dir, "small")
    with open(small, "wb") as f:
        f.write(os.urandom(4096))
    t({"op": "write", "key": k, "path": "small.bin", "file": small})
    timed([d.docker, "cp", small, f"{cid}:/maf-sandbox/work/small2.bin"], env)
    for i in range(n):
        _, doc = t({"op": "read", "key": k, "path": "small.bin", "out": back})
        r["small_walk"].append(doc["time_s"])
        _, doc = t({"op": "read", "key": k, "path": "small.bin", "out": back}, e=aenv)
        r["small_agent"].append(doc["time_s"])
        _, doc = t({"op": "read", "key": k, "path": "small.bin", "out": back}, e=henv)
        r["small_host"].append(doc["time_s"])
        dt, _ = timed([d.docker, "cp", f"{cid}:/maf-sandbox/work/small2.bin", back], env)
        r["docker_cp_small"].append(dt)
    wk = {"scope": "bench", "thread": "wslc", "agent": "b"}
    t({"op": "acquire", "key": wk}, wcfg)
    _, doc = t({"op": "exec", "key": wk, "argv": ["true"], "repeat": n + 2}, wcfg)
    r["wslc_exec_lib"] = doc["times"][2:]
    return r


def run_files(d, tool, n):
    """The 64 MiB write and read on the host's file plane (the default on a
    local engine) beside `docker cp` in and out, interleaved (issue 19)."""
    env = dict(d.env(), MSB_AGENT=os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(tool))), "agent", "msb-agent"))
    cfg = json.dumps({"type": "docker", "host": d.host, "image": IMAGE})

    def t(req, wall_key):
        wall, p = timed([tool, cfg, json.dumps(req)], env)
        doc = json.loads(p.stdout)
        assert "error" not in doc, doc
        r[wall_key].append(wall)
        return doc

    r = {k: [] for k in ("write_host", "read_host", "docker_cp_in", "docker_cp_out",
                         "write_host_wall", "read_host_wall", "acquire_tool_wall")}
    k = {"scope": "bench", "thread": "files", "agent": "b"}
    cid = t({"op": "acquire", "key": k}, "acquire_tool_wall")["instance_id"]
    blob = os.path.join(d.dir, "blob")
    with open(blob, "wb") as f:
        f.write(os.urandom(64 << 20))
    back = os.path.join(d.dir, "back")
    for _ in range(n):
        r["write_host"].append(t({"op": "write", "key": k, "path": "blob.bin",
                                  "file": blob}, "write_host_wall")["time_s"])
        r["read_host"].append(t({"op": "read", "key": k, "path": "blob.bin",
                                 "out": back}, "read_host_wall")["time_s"])
        dt, _ = timed([d.docker, "cp", blob, f"{cid}:/maf-sandbox/work/peer.bin"], env)
        r["docker_cp_in"].append(dt)
        dt, _ = timed([d.docker, "cp", f"{cid}:/maf-sandbox/work/peer.bin", back], env)
        r["docker_cp_out"].append(dt)
    return r


def run_egress(d, tool, proxy, n):
    env = d.env()
    cfg = json.dumps({"type": "docker", "host": d.host, "image": IMAGE,
                      "egress_proxy_image": "msb-bench-proxy", "egress_network": d.out_network,
                      "egress_proxy": proxy,
                      "egress": {"hosts": {"allowed.test": [d.out_gateway]},
                                 "allow_cidrs": [d.out_gateway + "/32"],
                                 "system_resolver": False}})
    r = {"acquire_allow_lib": [], "acquire_allow_warm_lib": [], "docker_allow": []}

    def t(req):
        _, p = timed([tool, cfg, json.dumps(req)], env)
        doc = json.loads(p.stdout)
        assert "error" not in doc, doc
        return doc

    t({"op": "declarations"})  # the proxy image imported once, before timing
    image = [x for x in d.cli("images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
             if x.startswith("msb-bench-proxy:")][0]
    conf = json.dumps({"allow": [{"host": "allowed.test", "methods": None}],
                       "hosts": {"allowed.test": [d.out_gateway]}, "system_resolver": False})
    for i in range(n):
        k = {"scope": "bench", "thread": f"e{i}", "agent": "b"}
        r["acquire_allow_lib"].append(t({"op": "acquire", "key": k,
                                         "allow": ["allowed.test"]})["acquire_s"])
        r["acquire_allow_warm_lib"].append(t({"op": "acquire", "key": k,
                                              "allow": ["allowed.test"]})["acquire_s"])
        t0 = time.monotonic()
        net, px = f"pnet{i}", f"pproxy{i}"
        timed([d.docker, "network", "create", "--internal", "-o",
               "com.docker.network.bridge.inhibit_ipv4=true", net], env)
        timed([d.docker, "run", "-d", "--name", px, "--network", net, "--cap-drop", "ALL",
               "-e", "MSB_EGRESS_CONFIG=" + conf, image, "/msb-egress-proxy", "serve"], env)
        while b"listening\n" not in timed([d.docker, "logs", px], env)[1].stderr:
            time.sleep(0.05)
        timed([d.docker, "network", "connect", d.out_network, px], env)
        timed([d.docker, "run", "-d", "--network", net, "-e", f"HTTP_PROXY=http://{px}:3128",
               IMAGE, "sleep", "infinity"], env)
        r["docker_allow"].append(time.monotonic() - t0)
    return r


STREAM_LOOP = ("while read c; do case $c in e) echo e;; w) head -c 67108864 > /tmp/f; echo ok;;"
               " r) cat /tmp/f;; esac; done")


class _Stream:
    """One exec on a hijacked Engine API connection (POST /exec/ID/start with
    Upgrade: tcp): raw bytes in, the engine's 8-byte-header frames out."""

    def __init__(self, sock_path, cid):
        import http.client
        import socket

        class C(http.client.HTTPConnection):
            def connect(self):
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(sock_path)
        c = C("docker")
        body = json.dumps({"AttachStdin": True, "AttachStdout": True, "AttachStderr": True,
                           "Cmd": ["sh", "-c", STREAM_LOOP]})
        c.request("POST", f"/v1.41/containers/{cid}/exec", body,
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        eid = json.loads(r.read())["Id"]
        c.close()
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(sock_path)
        body = b'{"Detach":false,"Tty":false}'
        self.s.sendall(b"POST /v1.41/exec/%s/start HTTP/1.1\r\nHost: docker\r\n"
                       b"Content-Type: application/json\r\nConnection: Upgrade\r\n"
                       b"Upgrade: tcp\r\nContent-Length: %d\r\n\r\n%s"
                       % (eid.encode(), len(body), body))
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += self.s.recv(65536)
        head, rest = buf.split(b"\r\n\r\n", 1)
        self.buf, self.pos = bytearray(rest), 0
        assert head.startswith(b"HTTP/1.1 101"), head

    def _fill(self, n):
        """At least n unread bytes in self.buf[self.pos:]."""
        if len(self.buf) - self.pos >= n:
            return
        del self.buf[:self.pos]
        self.pos = 0
        while len(self.buf) < n:
            got = self.s.recv(4 << 20)
            assert got, "the stream ended"
            self.buf += got

    def read_out(self, n):
        """n bytes of stdout, across frames."""
        out = bytearray()
        while len(out) < n:
            self._fill(8)
            h = self.pos
            size = int.from_bytes(self.buf[h + 4:h + 8], "big")
            assert self.buf[h] == 1, "stderr"
            self._fill(8 + size)
            h = self.pos
            out += memoryview(self.buf)[h + 8:h + 8 + size]
            self.pos = h + 8 + size
        assert len(out) == n, "over-read"
        return bytes(out)


def run_stream(d, n):
    env = d.env()
    _, p = timed([d.docker, "run", "-d", "--network", "none", IMAGE, "sleep", "infinity"], env)
    cid = p.stdout.decode().strip()
    st = _Stream(d.sock, cid)
    blob = os.urandom(64 << 20)
    path = os.path.join(d.dir, "sblob")
    with open(path, "wb") as f:
        f.write(blob)
    r = {k: [] for k in ("stream_rtt", "stream_write", "stream_read", "docker_exec_s",
                         "docker_cp_in_s", "docker_cp_out_s", "root_write", "root_read")}
    pid = d.cli("inspect", "-f", "{{.State.Pid}}", cid).stdout.strip()
    root = os.open(f"/proc/{pid}/root/tmp", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(n):
        t0 = time.monotonic()
        st.s.sendall(b"e\n")
        assert st.read_out(2) == b"e\n"
        r["stream_rtt"].append(time.monotonic() - t0)
        t0 = time.monotonic()
        st.s.sendall(b"w\n")
        st.s.sendall(blob)
        assert st.read_out(3) == b"ok\n"
        r["stream_write"].append(time.monotonic() - t0)
        t0 = time.monotonic()
        st.s.sendall(b"r\n")
        assert st.read_out(64 << 20) == blob
        r["stream_read"].append(time.monotonic() - t0)
        r["docker_exec_s"].append(timed([d.docker, "exec", cid, "true"], env)[0])
        r["docker_cp_in_s"].append(timed([d.docker, "cp", path, f"{cid}:/tmp/p"], env)[0])
        r["docker_cp_out_s"].append(timed([d.docker, "cp", f"{cid}:/tmp/p",
                                           path + ".back"], env)[0])
        t0 = time.monotonic()
        fd = os.open("h", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644,
                     dir_fd=root)
        os.write(fd, blob)
        os.close(fd)
        r["root_write"].append(time.monotonic() - t0)
        t0 = time.monotonic()
        fd = os.open("h", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=root)
        got = os.read(fd, (64 << 20) + 1)
        os.close(fd)
        r["root_read"].append(time.monotonic() - t0)
        assert got == blob
    os.close(root)
    st.s.close()
    timed([d.docker, "rm", "-f", cid], env)
    return r


def report(r, n):
    med = {k: statistics.median(v) * 1000 for k, v in r.items() if v}
    rows = [
        ("acquire (new container)", "acquire_lib", "acquire_tool_wall", "docker_run"),
        ("exec /bin/true", "exec_lib", "exec_tool_wall", "docker_exec"),
        ("exec (engine exec)", "exec_engine_lib", None, "docker_exec"),
        ("64 MiB write (walk)", "write_lib", None, "docker_cp_in"),
        ("64 MiB write (agent)", "write_agent", None, "docker_cp_in"),
        ("64 MiB write (host)", "write_host", "write_host_wall", "docker_cp_in"),
        ("64 MiB read (walk)", "read_lib", None, "docker_cp_out"),
        ("64 MiB read (agent)", "read_agent", None, "docker_cp_out"),
        ("64 MiB read (host)", "read_host", "read_host_wall", "docker_cp_out"),
        ("4 KiB read (walk)", "small_walk", None, "docker_cp_small"),
        ("4 KiB read (agent)", "small_agent", None, "docker_cp_small"),
        ("4 KiB read (host)", "small_host", None, "docker_cp_small"),
        ("wslc exec /bin/true", "wslc_exec_lib", None, "docker_exec"),
        ("acquire allowlist (new)", "acquire_allow_lib", None, "docker_allow"),
        ("acquire allowlist (warm)", "acquire_allow_warm_lib", None, None),
        ("stream probe: round trip", "stream_rtt", None, "docker_exec_s"),
        ("stream probe: 64 MiB in", "stream_write", None, "docker_cp_in_s"),
        ("stream probe: 64 MiB out", "stream_read", None, "docker_cp_out_s"),
        ("host root probe: 64 MiB in", "root_write", None, "docker_cp_in_s"),
        ("host root probe: 64 MiB out", "root_read", None, "docker_cp_out_s"),
    ]
    print(f"medians of {n} runs, ms; ratio = peer / msb (in-process)")
    print(f"{'':26} {'msb':>9} {'msb proc':>9} {'peer':>9} {'ratio':>7}")
    for name, ours, wall, peer in rows:
        if ours not in med:
            continue
        w = f"{med[wall]:9.1f}" if wall in med else f"{'':9}"
        pr = f"{med[peer]:9.1f} {med[peer] / med[ours]:7.2f}" if peer else ""
        print(f"{name:26} {med[ours]:9.1f} {w} {pr}")


if __name__ == "__main__":
    main()
