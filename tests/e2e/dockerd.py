"""A private Docker engine for the engine backends' tests (issue 19).

Starts `dockerd` with its own data root, exec root, unix socket, pid file and
containerd namespace, no bridge and no iptables rules (every sandbox runs with
NetworkMode none), imports a busybox root filesystem made here from Debian's
busybox-static as the only image, and at the end stops the engine and removes
everything it made. Nothing is pulled: the image is a local tar.
"""
import hashlib
import io
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time

IMAGE = "msb-test:busybox"


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
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="msb-dk-", dir="/tmp")
        self.sock = os.path.join(self.dir, "d.sock")
        self.host = "unix://" + self.sock
        self.proc = None
        self.log = None
        self.docker = shutil.which("docker")
        if not shutil.which("dockerd") or not self.docker:
            raise RuntimeError("docker.io is not installed (scripts/install-deps)")

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
             "--iptables=false", "--ip-masq=false", "--userland-proxy=false",
             "--log-level", "warn",
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
        if self.proc and self.proc.poll() is None:
            # Containers first (force remove never waits on SIGTERM).
            ids = self.cli("ps", "-aq").stdout.split()
            if ids:
                self.cli("rm", "-f", *ids, timeout=120)
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
