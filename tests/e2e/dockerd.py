"""A private Docker engine for the engine backends' tests (issue 19).

Starts `dockerd` with its own data root, exec root, unix socket, pid file and
containerd namespace, no default bridge, no iptables rules and no change to
the host's forwarding (--iptables=false --ip-forward=false), and imports a
busybox root filesystem made here from Debian's busybox-static as the image.
Nothing is pulled: the images are local tars.

For the allowlist topology (`with_egress()`): networks from an address pool
of this engine's own (10.N.0.0/17, N from its directory), and one outbound
network with a bridge of its own name (msbo + 8 hex) and range (10.N.200.0/24),
whose host address 10.N.200.1 is where the tests' servers listen, the
engine's DNS forwarder points, and the proxies dial. The internal networks
get no host address (inhibit_ipv4). At the end every network the engine made
is removed, and the test checks no bridge of its names is left on the host.
"""
import hashlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time

IMAGE = "msb-test:busybox"
TOOLS_IMAGE = "msb-test:tools"


def _busybox():
    for p in ("/bin/busybox", "/usr/bin/busybox"):
        if os.access(p, os.X_OK):
            return p
    raise RuntimeError("busybox-static is not installed (scripts/install-deps)")


def rootfs_tar():
    """A root filesystem: a static busybox, its applets as links, /tmp."""
    bb = _busybox()
    applets = subprocess.run([bb, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for d, mode in (("bin", 0o755), ("tmp", 0o1777), ("etc", 0o755), ("root", 0o700),
                        ("var", 0o755), ("var/tmp", 0o1777),
                        ("proc", 0o755), ("sys", 0o755), ("dev", 0o755)):
            ti = tarfile.TarInfo(d)
            ti.type = tarfile.DIRTYPE
            ti.mode = mode
            t.addfile(ti)
        with open(bb, "rb") as f:
            data = f.read()
        ti = tarfile.TarInfo("bin/busybox")
        ti.size = len(data)
        ti.mode = 0o755
        t.addfile(ti, io.BytesIO(data))
        for a in applets:
            if a == "busybox":
                continue
            ti = tarfile.TarInfo("bin/" + a)
            ti.type = tarfile.SYMTYPE
            ti.linkname = "busybox"
            t.addfile(ti)
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n"
        ti = tarfile.TarInfo("etc/passwd")
        ti.size = len(passwd)
        t.addfile(ti, io.BytesIO(passwd))
    return buf.getvalue()


def _libs(paths):
    """The shared libraries (and the loader) the ELF files in paths need, by
    the paths the loader asks for."""
    libs = set()
    for p in paths:
        out = subprocess.run(["ldd", p], capture_output=True, text=True).stdout
        for line in out.splitlines():
            for tok in line.split():
                if tok.startswith("/") and os.path.exists(tok):
                    libs.add(tok)
    return libs


def _usr(path):
    """The /usr path of a path under the merged /lib or /lib64."""
    for top in ("/lib/", "/lib64/"):
        if path.startswith(top):
            return "/usr" + path
    return path


def tools_rootfs_tar():
    """busybox, plus Debian's python3 (its standard library without tests)
    and curl with the libraries they load, /lib and /lib64 merged into /usr
    as on the host: the guest side of the egress tests (the attack scripts,
    the EGRESS conformance suite's curl)."""
    base = rootfs_tar()
    buf = io.BytesIO()
    py = os.path.realpath("/usr/bin/python3")
    curl = shutil.which("curl")
    ver = os.path.basename(py)
    stdlib = os.path.join("/usr/lib", ver)
    skip = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "__pycache__",
            "site-packages", "dist-packages", "pydoc_data", "unittest", "distutils"}
    files, elves = [], [py] + ([curl] if curl else [])
    for root, dirs, names in os.walk(stdlib):
        dirs[:] = [d for d in dirs if d not in skip and not d.startswith("config-")]
        for n in names:
            f = os.path.join(root, n)
            files.append(f)
            if n.endswith(".so"):
                elves.append(f)
    with tarfile.open(fileobj=io.BytesIO(base)) as src, tarfile.open(fileobj=buf, mode="w") as t:
        seen = set()
        for m in src.getmembers():
            t.addfile(m, src.extractfile(m) if m.isfile() else None)
            seen.add(m.name)

        def parents(arc):
            parts = arc.split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in seen:
                    seen.add(d)
                    ti = tarfile.TarInfo(d)
                    ti.type = tarfile.DIRTYPE
                    ti.mode = 0o755
                    t.addfile(ti)

        def add(path, arc=None):
            arc = (arc or path).lstrip("/")
            if arc in seen:
                return
            parents(arc)
            seen.add(arc)
            st = os.stat(path)
            ti = tarfile.TarInfo(arc)
            ti.size = st.st_size
            ti.mode = st.st_mode & 0o777
            with open(path, "rb") as f:
                t.addfile(ti, f)

        def link(arc, target):
            arc = arc.lstrip("/")
            if arc in seen:
                return
            parents(arc)
            seen.add(arc)
            ti = tarfile.TarInfo(arc)
            ti.type = tarfile.SYMTYPE
            ti.linkname = target
            t.addfile(ti)

        link("/lib", "usr/lib")
        link("/lib64", "usr/lib64")
        add(py, "/usr/bin/python3")
        if curl:
            add(curl, "/usr/bin/curl")
        for f in files:
            add(f)
        for lib in sorted(_libs(elves)):
            real = os.path.realpath(lib)
            add(real)
            if _usr(lib) != real:
                link(_usr(lib), real)
    return buf.getvalue()


def _ping(sock):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(2)
        s.connect(sock)
        s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        data = s.recv(4096)
        s.close()
        return b" 200 " in data
    except OSError:
        return False


class PrivateDockerd:
    kind = "dockerd"

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="engine-dk-", dir="/tmp")
        self.sock = os.path.join(self.dir, "d.sock")
        self.host = "unix://" + self.sock
        self.proc = None
        self.log = None
        self.docker = shutil.which("docker")
        if not shutil.which("dockerd") or not self.docker:
            raise RuntimeError("docker.io is not installed (scripts/install-deps)")
        tag = hashlib.sha256(self.dir.encode()).hexdigest()
        # 10.N: this engine's own range (N in 100..227, from its directory).
        n = 100 + int(tag[:4], 16) % 128
        self.pool = f"10.{n}.0.0/17"
        self.out_subnet = f"10.{n}.200.0/24"
        self.out_gateway = f"10.{n}.200.1"
        self.out_network = "msbo" + tag[:8]  # the network's and its bridge's name
        self.egress = False

    def env(self):
        e = dict(os.environ)
        e["DOCKER_HOST"] = self.host
        return e

    def start(self, timeout=60):
        self.log = open(os.path.join(self.dir, "dockerd.log"), "ab")
        # containerd namespaces are [A-Za-z0-9] words joined by [._-].
        name = "msbdk" + hashlib.sha256(self.dir.encode()).hexdigest()[:12]
        self.proc = subprocess.Popen(
            ["dockerd", "--data-root", os.path.join(self.dir, "data"),
             "--exec-root", os.path.join(self.dir, "x"), "-H", self.host,
             "--pidfile", os.path.join(self.dir, "pid"), "--bridge=none",
             "--iptables=false", "--ip-forward=false", "--ip-masq=false",
             "--userland-proxy=false", "--default-address-pool", f"base={self.pool},size=24",
             "--dns", self.out_gateway, "--log-level", "warn",
             "--containerd-namespace", name, "--containerd-plugins-namespace", name + "-p"],
            stdout=self.log, stderr=self.log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("dockerd exited: " + self.read_log())
            if _ping(self.sock):
                return
            time.sleep(0.1)
        raise RuntimeError("dockerd did not answer: " + self.read_log())

    def reset_state(self):
        """Forget everything the engine held (after a crash)."""
        assert self.proc is None or self.proc.poll() is not None
        self._unmount()
        for d in ("data", "x"):
            shutil.rmtree(os.path.join(self.dir, d), ignore_errors=True)

    def _unmount(self):
        mounts = []
        with open("/proc/self/mounts") as f:
            for line in f:
                mp = line.split()[1]
                if mp.startswith(self.dir + "/"):
                    mounts.append(mp)
        for mp in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mp], capture_output=True)

    def read_log(self):
        with open(os.path.join(self.dir, "dockerd.log"), "rb") as f:
            return f.read()[-4000:].decode(errors="replace")

    def import_image(self):
        p = subprocess.run([self.docker, "import", "-", IMAGE], input=rootfs_tar(),
                           capture_output=True, env=self.env(), timeout=120)
        assert p.returncode == 0, p.stderr

    def import_tools_image(self):
        p = subprocess.run([self.docker, "import", "-", TOOLS_IMAGE], input=tools_rootfs_tar(),
                           capture_output=True, env=self.env(), timeout=300)
        assert p.returncode == 0, p.stderr

    def with_egress(self):
        """The outbound network the proxies dial from (see the module's note)."""
        self.cli("network", "create", "--subnet", self.out_subnet, "--gateway",
                 self.out_gateway, "-o", f"com.docker.network.bridge.name={self.out_network}",
                 self.out_network, check=True)
        self.egress = True

    def bridges(self):
        """Host interfaces of this engine's names: its outbound bridge, and
        the br-<id> of every network it holds."""
        ids = self.cli("network", "ls", "-q", "--no-trunc").stdout.split()
        names = {self.out_network} | {"br-" + i[:12] for i in ids}
        have = os.listdir("/sys/class/net")
        return sorted(n for n in have if n in names)

    def remove_networks(self):
        ids = self.cli("network", "ls", "-q", "--filter", "type=custom").stdout.split()
        gone = []
        for i in ids:
            full = self.cli("network", "inspect", "-f", "{{.Id}}", i).stdout.strip()
            if self.cli("network", "rm", i).returncode == 0:
                gone.append("br-" + full[:12])
        return gone

    def cli(self, *args, timeout=60, check=False):
        p = subprocess.run([self.docker, *args], capture_output=True, text=True,
                           env=self.env(), timeout=timeout)
        if check:
            assert p.returncode == 0, (args, p.stderr)
        return p

    def containers(self, *filters):
        args = ["ps", "-a", "--format", "{{.Names}}"]
        for f in filters:
            args += ["--filter", f]
        return sorted(self.cli(*args, check=True).stdout.split())

    def kill(self):
        """SIGKILL dockerd. Its containerd, the shims and the containers run
        on, as after a daemon crash; a restart reattaches to them."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _ours(self):
        """Every process whose command line names our directory."""
        pids = []
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == os.getpid():
                continue
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if self.dir.encode() in f.read():
                        pids.append(int(d))
            except OSError:
                pass
        return pids

    def reap_leftovers(self):
        """What a daemon that could not stop cleanly left: its containers
        (through runc's own state), then containerd and the shims."""
        runc_roots = os.path.join(self.dir, "x", "runtime-runc")
        if os.path.isdir(runc_roots):
            for ns in os.listdir(runc_roots):
                root = os.path.join(runc_roots, ns)
                ids = subprocess.run(["runc", "--root", root, "list", "-q"], capture_output=True,
                                     text=True).stdout.split()
                for cid in ids:
                    subprocess.run(["runc", "--root", root, "delete", "--force", cid],
                                   capture_output=True)
        for pid in self._ours():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop(self):
        bridges = []
        if self.proc and self.proc.poll() is None:
            # Containers first (force remove never waits on SIGTERM).
            ids = self.cli("ps", "-aq").stdout.split()
            if ids:
                self.cli("rm", "-f", *ids, timeout=120)
            bridges = self.remove_networks()
        # A bridge the engine did not take down with its network.
        for b in bridges + [self.out_network]:
            if os.path.exists(f"/sys/class/net/{b}"):
                subprocess.run(["ip", "link", "del", b], capture_output=True)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        self.reap_leftovers()
        if self.log:
            self.log.close()

    def cleanup(self):
        self.stop()
        # Whatever is still mounted under our directory (overlays, shm).
        self._unmount()
        shutil.rmtree(self.dir, ignore_errors=True)
