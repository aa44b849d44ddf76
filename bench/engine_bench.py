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
                warm process (exec create + hijacked start + inspect), and a
                whole msb-engine-tool process, beside `docker exec C true`
  64 MiB write  the backend's write_file beside `docker cp FILE C:/PATH`: with
                the confined agent (one exec of msb-agent, the bytes on its
                stdin) and with the tar-header walk (stats + archive PUT)
  64 MiB read   read_file the same two ways beside `docker cp C:/PATH FILE`
  4 KiB read    a small file, both ways, beside `docker cp`
  wslc exec     the wslc backend's exec through tests/fixtures/wslc beside the
                `docker exec` it becomes: the CLI contract's overhead
  acquire allowlist  a new sandbox with the allowlist topology (internal
                network, msb's proxy started and waited for, its outbound leg,
                the workload) beside the same with the docker CLI (`network
                create --internal`, `run` the proxy, poll `logs` for its
                "listening", `network connect`, `run` the workload)
  acquire allowlist, warm  the same key again: the proxy kept

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
    a = ap.parse_args()
    tool = os.path.join(a.build, "tests", "engine", "msb-engine-tool")
    d = PrivateDockerd()
    try:
        d.start()
        d.import_image()
        d.with_egress()
        res = run(d, tool, a.n)
        res.update(run_egress(d, tool, os.path.join(a.build, "proxy", "msb-egress-proxy"), a.n))
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
    env = dict(d.env(), MSB_AGENT="/nonexistent/msb-agent")  # the walk
    aenv = dict(d.env(), MSB_AGENT=os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(tool))), "agent", "msb-agent"))
    cfg = json.dumps({"type": "docker", "host": d.host, "image": IMAGE})
    wcfg = json.dumps({"type": "wslc", "wslc_path": os.path.join(ROOT, "tests", "fixtures",
                                                                  "wslc"), "image": IMAGE})

    def t(req, c=cfg, e=env):
        dt, p = timed([tool, c, json.dumps(req)], e)
        doc = json.loads(p.stdout)
        assert "error" not in doc, doc
        return dt, doc

    r = {k: [] for k in ("acquire_tool_wall", "acquire_lib", "docker_run", "exec_lib",
                         "exec_tool_wall", "docker_exec", "write_lib", "docker_cp_in",
                         "read_lib", "docker_cp_out", "wslc_exec_lib", "wslc_exec_wall",
                         "write_agent", "read_agent", "small_walk", "small_agent",
                         "docker_cp_small")}
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
    _, doc = t({"op": "exec", "key": k, "argv": ["true"], "repeat": n + 2})
    r["exec_lib"] = doc["times"][2:]
    for _ in range(n):
        wall, _ = t({"op": "exec", "key": k, "argv": ["true"]})
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
        dt, _ = timed([d.docker, "cp", f"{cid}:/maf-sandbox/work/small2.bin", back], env)
        r["docker_cp_small"].append(dt)
    wk = {"scope": "bench", "thread": "wslc", "agent": "b"}
    t({"op": "acquire", "key": wk}, wcfg)
    _, doc = t({"op": "exec", "key": wk, "argv": ["true"], "repeat": n + 2}, wcfg)
    r["wslc_exec_lib"] = doc["times"][2:]
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


def report(r, n):
    med = {k: statistics.median(v) * 1000 for k, v in r.items() if v}
    rows = [
        ("acquire (new container)", "acquire_lib", "acquire_tool_wall", "docker_run"),
        ("exec /bin/true", "exec_lib", "exec_tool_wall", "docker_exec"),
        ("64 MiB write (walk)", "write_lib", None, "docker_cp_in"),
        ("64 MiB write (agent)", "write_agent", None, "docker_cp_in"),
        ("64 MiB read (walk)", "read_lib", None, "docker_cp_out"),
        ("64 MiB read (agent)", "read_agent", None, "docker_cp_out"),
        ("4 KiB read (walk)", "small_walk", None, "docker_cp_small"),
        ("4 KiB read (agent)", "small_agent", None, "docker_cp_small"),
        ("wslc exec /bin/true", "wslc_exec_lib", None, "docker_exec"),
        ("acquire allowlist (new)", "acquire_allow_lib", None, "docker_allow"),
        ("acquire allowlist (warm)", "acquire_allow_warm_lib", None, None),
    ]
    print(f"medians of {n} runs, ms; ratio = peer / msb (in-process)")
    print(f"{'':26} {'msb':>9} {'msb proc':>9} {'peer':>9} {'ratio':>7}")
    for name, ours, wall, peer in rows:
        w = f"{med[wall]:9.1f}" if wall else f"{'':9}"
        pr = f"{med[peer]:9.1f} {med[peer] / med[ours]:7.2f}" if peer else ""
        print(f"{name:26} {med[ours]:9.1f} {w} {pr}")


if __name__ == "__main__":
    main()
