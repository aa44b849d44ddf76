#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The egress proxy beside squid and tinyproxy, and beside no proxy at all.

    bench/egress_bench.py [--build DIR] [-n N] [--mib M] [--reps R] [--rounds K]
                          [--cpu MILLIS] [--only TOOLS] [--no-install] [--json OUT]

Needs root (it starts ns sandboxes). One destination server on the host's
loopback: on each connection it reads an 8-byte big-endian count and sends
that many bytes, then closes. One client, the same python code everywhere,
measures in its own process:

  setup       N sequential connections, each: connect (+ the proxy's CONNECT
              handshake), ask for 1 byte, read it, close; per-connection time.
  throughput  R transfers of M MiB down one tunnel each; bytes / time from the
              first request byte to the last byte.

The client runs
  direct      on the host, straight to the server (the floor);
  msb         inside an ns sandbox (`msb exec`, a warm sandbox), through the
              shim's proxy at 127.0.0.1:3128 (allowlist: localhost; backend
              config allow_cidrs 127.0.0.0/8 and ::1); the sandbox (client and
              agent) runs under the backend's default CPU quota, one core;
              one relay: the agent hands its listener to the shim, which
              splices the guest's connection to the destination;
  msb-framed  the same in a second sandbox whose shim was started with
              MSB_SHIM_EGRESS_RELAY=framed: two relays, the agent's and the
              shim's, with the tunnel's bytes framed on agent.sock between
              them (the path a VM's agent takes);
  squid       on the host, through squid on a loopback port, configured as an
              allowlist proxy (dstdomain localhost, everything else denied);
  tinyproxy   on the host, through tinyproxy likewise (FilterDefaultDeny with
              a filter of localhost).
K rounds, the tools in a shuffled order each round; medians over all samples.
The proxy's own CPU time (utime + stime of msb-shim and msb-agent; of squid's
and tinyproxy's processes) is read around each run and reported per GiB
moved: on a shared machine it moves far less than wall-clock throughput.
squid and tinyproxy are installed from Debian here (apt-get) unless
--no-install; a missing one is reported, never faked. Everything started is
stopped and every temporary file removed on exit. Standard library only.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CLIENT = r"""
import json, socket, struct, sys, time
mode, proxy_host, proxy_port, host, port, n, mib, reps = sys.argv[1:9]
proxy_port, port, n, mib, reps = int(proxy_port), int(port), int(n), int(mib), int(reps)

def open_conn():
    if mode == "direct":
        s = socket.create_connection((host, port))
    else:
        s = socket.create_connection((proxy_host, proxy_port))
        s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                  % (host.encode(), port, host.encode(), port))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                raise SystemExit("proxy closed: %r" % head)
            head += chunk
        if not head.split(b"\r\n", 1)[0].split(b" ")[1] == b"200":
            raise SystemExit("proxy refused: %r" % head[:200])
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s

setup = []
for _ in range(n):
    t0 = time.perf_counter_ns()
    s = open_conn()
    s.sendall(struct.pack(">Q", 1))
    if s.recv(1) != b"x":
        raise SystemExit("short answer")
    s.close()
    setup.append((time.perf_counter_ns() - t0) / 1000)

tput = []
buf = bytearray(1 << 20)
view = memoryview(buf)
want = mib << 20
for _ in range(reps):
    s = open_conn()
    t0 = time.perf_counter_ns()
    s.sendall(struct.pack(">Q", want))
    got = 0
    while got < want:
        k = s.recv_into(view)
        if k == 0:
            raise SystemExit("short transfer: %d of %d" % (got, want))
        got += k
    dt = time.perf_counter_ns() - t0
    s.close()
    tput.append(want / (dt / 1e9))
print(json.dumps({"setup_us": setup, "bytes_per_s": tput}))
"""


class Blast:
    """The destination: answer each connection with the bytes it asks for."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.chunk = memoryview(b"x" * (1 << 20))
        self.stop = False
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        # Small answers inline (no thread to start: the setup figures are the
        # path's, not the server's); transfers in a thread of their own.
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                c.settimeout(30)
                hdr = b""
                while len(hdr) < 8:
                    k = c.recv(8 - len(hdr))
                    if not k:
                        break
                    hdr += k
            except OSError:
                hdr = b""
            if len(hdr) < 8:
                c.close()
                continue
            left = struct.unpack(">Q", hdr)[0]
            if left <= 65536:
                try:
                    c.sendall(self.chunk[:left])
                except OSError:
                    pass
                c.close()
                continue
            threading.Thread(target=self.serve, args=(c, left), daemon=True).start()

    def serve(self, c, left):
        try:
            while left > 0:
                k = min(left, len(self.chunk))
                c.sendall(self.chunk[:k])
                left -= k
            c.shutdown(socket.SHUT_WR)
            c.recv(1)
        except OSError:
            pass
        finally:
            c.close()

    def close(self):
        self.stop = True
        self.sock.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc, what, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port}")


def start_squid(work, notes):
    exe = shutil.which("squid") or "/usr/sbin/squid"
    if not os.path.exists(exe):
        notes.append("squid: not installed")
        return None
    port = free_port()
    d = os.path.join(work, "squid")
    os.makedirs(d)
    os.chmod(d, 0o777)
    conf = os.path.join(d, "squid.conf")
    with open(conf, "w") as f:
        f.write(f"""http_port 127.0.0.1:{port}
acl allowed dstdomain localhost
acl CONNECT method CONNECT
http_access allow CONNECT allowed
http_access allow allowed
http_access deny all
cache deny all
access_log none
cache_store_log none
cache_log {d}/cache.log
pid_filename {d}/squid.pid
coredump_dir {d}
shutdown_lifetime 0 seconds
workers 1
""")
    p = subprocess.Popen([exe, "-N", "-f", conf], stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(d, "stderr"), "w"), start_new_session=True)
    try:
        wait_port(port, p, "squid")
    except RuntimeError as e:
        notes.append(f"squid: {e}: {open(os.path.join(d, 'stderr')).read()[-400:]}")
        stop(p)
        return None
    return p, port


def start_tinyproxy(work, notes):
    exe = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"
    if not os.path.exists(exe):
        notes.append("tinyproxy: not installed")
        return None
    port = free_port()
    d = os.path.join(work, "tinyproxy")
    os.makedirs(d)
    os.chmod(d, 0o777)
    filt = os.path.join(d, "filter")
    with open(filt, "w") as f:
        f.write("^localhost$\n")
    conf = os.path.join(d, "tinyproxy.conf")
    with open(conf, "w") as f:
        f.write(f"""Port {port}
Listen 127.0.0.1
Timeout 600
MaxClients 200
Allow 127.0.0.1
Filter "{filt}"
FilterURLs Off
FilterExtended On
FilterDefaultDeny Yes
LogLevel Critical
PidFile "{d}/tinyproxy.pid"
""")
    p = subprocess.Popen([exe, "-d", "-c", conf], stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(d, "stderr"), "w"), start_new_session=True)
    try:
        wait_port(port, p, "tinyproxy")
    except RuntimeError as e:
        notes.append(f"tinyproxy: {e}: {open(os.path.join(d, 'stderr')).read()[-400:]}")
        stop(p)
        return None
    return p, port


def stop(p):
    if p and p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def group_pids(pgid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid:
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def cpu_seconds(pids):
    """utime + stime of these processes (and their reaped children)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def msb_pids(state):
    for dirpath, _, files in os.walk(os.path.join(state, "ns")):
        if "shim.pid" in files and "init.pid" in files:
            out = []
            for name in ("shim.pid", "init.pid"):
                with open(os.path.join(dirpath, name)) as f:
                    out.append(int(f.read().split()[0]))
            return out
    return []


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q / 100 * len(xs) + 0.5)) - 1))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("-n", type=int, default=200, help="connections per round (setup)")
    ap.add_argument("--mib", type=int, default=512, help="MiB per transfer")
    ap.add_argument("--reps", type=int, default=3, help="transfers per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cpu", type=int,
                    help="the sandbox's CPU quota in thousandths of a core (msb --cpu; "
                         "default: the backend's, 1000 as root)")
    ap.add_argument("--only",
                    help="comma-separated tools (direct,msb,msb-framed,squid,tinyproxy)")
    ap.add_argument("--no-install", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("egress_bench: run me as root (ns sandboxes)")
    msb = os.path.join(a.build, "cli", "msb")
    notes = []
    if not a.no_install:
        missing = [p for p, exe in (("squid", "squid"), ("tinyproxy", "tinyproxy"))
                   if not shutil.which(exe) and not os.path.exists(f"/usr/sbin/{exe}")
                   and not os.path.exists(f"/usr/bin/{exe}")]
        if missing:
            r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *missing],
                               capture_output=True, text=True,
                               env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
            if r.returncode != 0:
                notes.append(f"apt-get install {' '.join(missing)}: {r.stderr[-300:]}")
            # Debian starts the services: stop them, we run our own instances.
            for svc in missing:
                subprocess.run(["systemctl", "stop", svc], capture_output=True)
                subprocess.run(["service", svc, "stop"], capture_output=True)

    work = tempfile.mkdtemp(prefix="/tmp/msb-egress-bench-")
    os.chmod(work, 0o755)
    blast = Blast()
    procs = []
    state = os.path.join(work, "msb-state")
    thread = f"egress-bench-{os.getpid()}"
    results = {}
    try:
        cfg = os.path.join(work, "egress.json")
        with open(cfg, "w") as f:
            json.dump({"allow_cidrs": ["127.0.0.0/8", "::1/128"]}, f)
        msb_flags = ["--state-dir", state, "--min-isolation", "container", "--thread", thread,
                     "--allow", "localhost", "--egress-config", cfg,
                     *(["--cpu", str(a.cpu)] if a.cpu else [])]
        tools = {"direct": ["direct", "-", "0"]}
        warm = subprocess.run([msb, "exec", *msb_flags, "--", "true"], capture_output=True)
        if warm.returncode == 0:
            tools["msb"] = ["proxy", "127.0.0.1", "3128"]
        else:
            notes.append(f"msb: {warm.stderr.decode()[-300:]}")
        only = set(a.only.split(",")) if a.only else None
        state2 = os.path.join(work, "msb-state-framed")
        msb_flags2 = ["--state-dir", state2, *msb_flags[2:]]
        if not only or "msb-framed" in only:
            warm = subprocess.run([msb, "exec", *msb_flags2, "--", "true"], capture_output=True,
                                  env={**os.environ, "MSB_SHIM_EGRESS_RELAY": "framed"})
            if warm.returncode == 0:
                tools["msb-framed"] = ["proxy", "127.0.0.1", "3128"]
            else:
                notes.append(f"msb-framed: {warm.stderr.decode()[-300:]}")
        sq = start_squid(work, notes) if not only or "squid" in only else None
        if sq:
            procs.append(sq[0])
            tools["squid"] = ["proxy", "127.0.0.1", str(sq[1])]
        tp = start_tinyproxy(work, notes) if not only or "tinyproxy" in only else None
        if tp:
            procs.append(tp[0])
            tools["tinyproxy"] = ["proxy", "127.0.0.1", str(tp[1])]
        if only:
            tools = {t: v for t, v in tools.items() if t in only or t == "direct"}
        samples = {t: {"setup_us": [], "bytes_per_s": [], "cpu_s": 0.0, "bytes": 0}
                   for t in tools}
        proxy_pids = {"direct": lambda: [], "msb": lambda: msb_pids(state),
                      "msb-framed": lambda: msb_pids(state2),
                      "squid": lambda: group_pids(sq[0].pid) if sq else [],
                      "tinyproxy": lambda: group_pids(tp[0].pid) if tp else []}
        for rnd in range(a.rounds):
            order = list(tools)
            random.shuffle(order)
            for t in order:
                args = [*tools[t], "localhost", str(blast.port), str(a.n), str(a.mib),
                        str(a.reps)]
                if t in ("msb", "msb-framed"):
                    flags = msb_flags if t == "msb" else msb_flags2
                    cmd = [msb, "exec", *flags, "--timeout", "600", "--", "python3", "-c",
                           CLIENT, *args]
                else:
                    cmd = [sys.executable, "-c", CLIENT, *args]
                pids = proxy_pids[t]()
                cpu0 = cpu_seconds(pids)
                r = subprocess.run(cmd, capture_output=True, timeout=900)
                cpu1 = cpu_seconds(pids)
                if r.returncode != 0:
                    notes.append(f"{t} round {rnd}: {r.stderr.decode()[-300:]}")
                    continue
                out = json.loads(r.stdout)
                samples[t]["setup_us"] += out["setup_us"]
                samples[t]["bytes_per_s"] += out["bytes_per_s"]
                samples[t]["cpu_s"] += cpu1 - cpu0
                samples[t]["bytes"] += a.reps * (a.mib << 20)
        for t, s in samples.items():
            if not s["setup_us"]:
                continue
            results[t] = {
                "setup_p50_us": statistics.median(s["setup_us"]),
                "setup_p90_us": pct(s["setup_us"], 90),
                "gbps_p50": statistics.median(s["bytes_per_s"]) / 1e9,
                "gbps_min": min(s["bytes_per_s"]) / 1e9,
                # CPU the proxy used (shim + agent for msb), per GiB moved;
                # the setup connections are included, a small part.
                "proxy_cpu_ms_per_gib": 1000 * s["cpu_s"] / (s["bytes"] / (1 << 30)),
                "n_setup": len(s["setup_us"]),
                "n_tput": len(s["bytes_per_s"]),
            }
    finally:
        for st in (state, os.path.join(work, "msb-state-framed")):
            if os.path.isdir(st):
                subprocess.run([msb, "dispose", "--state-dir", st, "--scope", "cli", "--agent",
                                "cli", "--thread", thread], capture_output=True)
        for p in procs:
            stop(p)
        blast.close()
        shutil.rmtree(work, ignore_errors=True)

    base = results.get("direct")
    msbr = results.get("msb")
    print(f"setup: {a.n} x {a.rounds} connections; throughput: {a.reps} x {a.rounds} "
          f"transfers of {a.mib} MiB")
    print("| client path | setup p50 (µs) | p90 (µs) | x direct | x msb | "
          "throughput p50 (GB/s) | min (GB/s) | x direct | x msb | proxy CPU ms/GiB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for t, r in results.items():
        print(f"| {t} | {r['setup_p50_us']:.0f} | {r['setup_p90_us']:.0f} | "
              f"{r['setup_p50_us'] / base['setup_p50_us']:.2f} | "
              f"{r['setup_p50_us'] / msbr['setup_p50_us'] if msbr else float('nan'):.2f} | "
              f"{r['gbps_p50']:.2f} | {r['gbps_min']:.2f} | "
              f"{r['gbps_p50'] / base['gbps_p50']:.2f} | "
              f"{r['gbps_p50'] / msbr['gbps_p50'] if msbr else float('nan'):.2f} | "
              f"{r['proxy_cpu_ms_per_gib']:.0f} |")
    for n in notes:
        print("note:", n)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "notes": notes, "args": vars(a)}, f, indent=1)


if __name__ == "__main__":
    main()
