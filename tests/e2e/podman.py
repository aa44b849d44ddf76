"""A private podman API service for the engine backends' tests (issue 19).

`podman system service` - podman's Docker-compatible API - on a unix socket
of its own, with its own storage (--root, --runroot, --tmpdir, volumes), its
own network configuration directory and its own containers.conf, so nothing
of the host's podman (if any) is used or changed. The same interface as
dockerd.PrivateDockerd for what the docker backend's tests need; the docker
CLI, pointed at the service, is the tests' own view of the engine.

This machine's quirks, handled here: root lacks CAP_SYS_RESOURCE, so the
containers' rlimits are set to what the service may set (default_ulimits);
the cgroup hierarchy is hybrid, which crun refuses, so runc is the runtime.
"""
import http.client
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from dockerd import IMAGE, _ping, rootfs_tar


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("podman", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def _hard_limit(name):
    with open("/proc/self/limits") as f:
        for line in f:
            if line.startswith(name):
                v = line[len(name):].split()[1]
                return None if v == "unlimited" else int(v)
    return None


class PrivatePodman:
    kind = "podman"

    def __init__(self):
        self.podman = shutil.which("podman")
        self.docker = shutil.which("docker")
        if not self.podman or not self.docker:
            raise RuntimeError("podman and the docker CLI are needed (scripts/install-deps)")
        self.dir = tempfile.mkdtemp(prefix="msb-pm-", dir="/tmp")
        self.sock = os.path.join(self.dir, "p.sock")
        self.host = "unix://" + self.sock
        self.proc = None
        self.log = None
        # The egress topology's tests run against dockerd only.
        self.out_network = "msb-pm-none"
        self.egress = False
        conf = os.path.join(self.dir, "containers.conf")
        nofile = _hard_limit("Max open files") or 1048576
        nproc = min(_hard_limit("Max processes") or 16384, 16384)
        with open(conf, "w") as f:
            f.write(f'[containers]\ndefault_ulimits = ["nofile={nofile}:{nofile}", '
                    f'"nproc={nproc}:{nproc}"]\n[engine]\nevents_logger = "file"\n')
        self.conf = conf

    def flags(self):
        d = self.dir
        f = ["--root", f"{d}/root", "--runroot", f"{d}/run", "--tmpdir", f"{d}/tmp",
             "--network-config-dir", f"{d}/cni", "--volumepath", f"{d}/vol",
             "--cgroup-manager", "cgroupfs", "--events-backend", "file"]
        if shutil.which("runc"):
            f += ["--runtime", shutil.which("runc")]
        return f

    def podman_env(self):
        e = dict(os.environ)
        e["CONTAINERS_CONF"] = self.conf
        return e

    def env(self):
        e = dict(os.environ)
        e["DOCKER_HOST"] = self.host
        return e

    def start(self, timeout=60):
        os.makedirs(os.path.join(self.dir, "cni"), exist_ok=True)
        self.log = open(os.path.join(self.dir, "podman.log"), "ab")
        self.proc = subprocess.Popen(
            [self.podman, *self.flags(), "system", "service", "--time=0", self.host],
            stdout=self.log, stderr=self.log, env=self.podman_env(), start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("podman exited: " + self.read_log())
            if _ping(self.sock):
                return
            time.sleep(0.1)
        raise RuntimeError("podman did not answer: " + self.read_log())

    def read_log(self):
        with open(os.path.join(self.dir, "podman.log"), "rb") as f:
            return f.read()[-4000:].decode(errors="replace")

    def import_image(self):
        # The API with the tag in `repo` (podman 4.3 ignores a separate `tag`,
        # which is what `docker import` sends).
        c = _UnixHTTP(self.sock)
        body = rootfs_tar()
        c.request("POST", "/v1.41/images/create?fromSrc=-&repo=" + IMAGE.replace(":", "%3A"),
                  body=body, headers={"Content-Type": "application/x-tar"})
        r = c.getresponse()
        out = r.read()
        assert r.status == 200 and b'"error' not in out, out
        c.close()

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

    def bridges(self):
        return []

    def kill(self):
        """SIGKILL the API service; conmon and the containers run on."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _podman(self, *args, timeout=120):
        return subprocess.run([self.podman, *self.flags(), *args], capture_output=True,
                              env=self.podman_env(), timeout=timeout)

    def _ours(self):
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
        self._podman("rm", "-af", "-t", "0")
        for pid in self._ours():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def reset_state(self):
        self._podman("system", "reset", "-f")
        self._unmount()

    def _unmount(self):
        mounts = []
        with open("/proc/self/mounts") as f:
            for line in f:
                mp = line.split()[1]
                if mp.startswith(self.dir + "/"):
                    mounts.append(mp)
        for mp in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mp], capture_output=True)

    def stop(self):
        if self.proc and self.proc.poll() is None:
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
        self.reset_state()
        shutil.rmtree(self.dir, ignore_errors=True)
