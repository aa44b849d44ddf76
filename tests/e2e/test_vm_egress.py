"""Egress `allowlist` on the vm backend, end to end through the CLI (issue 18).

One `msb run` of a vm backend (one VM boot under TCG): python3 in the guest
asks for two URLs through the proxy variables the agent gives it - one on
the allowlist, one not - and every decision comes back as an EgressObserved
event (checklist 17.5, 17.9); bulk bytes (3 MiB down, 2 MiB up, past the
tunnels' credit windows) cross the serial mux intact. The destination is an
HTTP server on the host's loopback, reached because the backend's egress
configuration names 127.0.0.0/8 and pins the test names in its hosts map
(as test_egress.py does for ns). The VM has no network device: the guest's
only way out is its agent's proxy port, relayed to the shim's proxy.
"""
import hashlib
import http.server
import json
import os
import threading

import pytest

from leaks import checked_state_root

VM_READY = (os.geteuid() == 0 and os.path.exists("/usr/bin/qemu-system-x86_64")
            and any(n.startswith("vmlinuz-") and n.endswith("-cloud-amd64")
                    for n in os.listdir("/boot")))
pytestmark = pytest.mark.skipif(not VM_READY,
                                reason="the vm backend needs root, qemu and a cloud kernel")

BODY = b"hello from the vm egress test host\n"


class _Answer(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/big/"):
            self._answer(bytes(i % 251 for i in range(int(self.path[5:]))))
            return
        self._answer(BODY)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._answer(hashlib.sha256(body).hexdigest().encode())

    def log_message(self, *a):
        pass


@pytest.fixture
def state():
    yield from checked_state_root("/tmp/msb-vmeg-e2e-")


@pytest.fixture
def http_host():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


GUEST = r"""
import hashlib, json, os, sys, urllib.request
out = {"proxy": os.environ.get("HTTP_PROXY")}
for name, url in json.loads(sys.argv[1]):
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            out[name] = [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        out[name] = [e.code, e.read().decode()]
    except Exception as e:
        out[name] = [0, repr(e)]
# Bulk bytes both ways, past the tunnels' credit windows: intact.
base = json.loads(sys.argv[1])[0][1]
n = 3 * 1024 * 1024
down = urllib.request.urlopen(base.replace("/x", "/big/%d" % n), timeout=120).read()
out["down"] = down == bytes(i % 251 for i in range(n))
up = os.urandom(2 * 1024 * 1024)
got = urllib.request.urlopen(urllib.request.Request(base, data=up), timeout=120).read().decode()
out["up"] = got == hashlib.sha256(up).hexdigest()
print(json.dumps(out))
"""


def test_vm_allowlist_answers_refuses_and_reports_17_9(msb, state, tmp_path, http_host):
    cfg = tmp_path / "vm.json"
    # The built initramfs and image are shared across runs (content-addressed).
    cfg.write_text(json.dumps({"type": "vm", "state_dir": state,
                               "cache_dir": "/tmp/msb-vm-test-cache"}))
    egress = tmp_path / "egress.json"
    egress.write_text(json.dumps({
        "allow_cidrs": ["127.0.0.0/8"], "system_resolver": False,
        "hosts": {"allowed.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}}))
    events = tmp_path / "events.jsonl"
    urls = [["allowed", f"http://allowed.test:{http_host}/x"],
            ["unlisted", f"http://other.test:{http_host}/x"]]
    p = msb("run", "--config", str(cfg), "--min-isolation", "container",
            "--egress-config", str(egress), "--allow", "allowed.test",
            "--events", str(events), "--", "python3", "-c", GUEST, json.dumps(urls),
            timeout=600)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    out = json.loads(p.stdout)
    assert out["proxy"] == "http://127.0.0.1:3128"
    assert out["allowed"] == [200, BODY.decode()]
    assert out["unlisted"][0] == 403 and "not-allowlisted" in out["unlisted"][1]
    assert out["down"] and out["up"], out
    evs = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
    evs = [e for e in evs if e["event"] == "EgressObserved"]
    by_host = {e["host"]: e for e in evs}
    allowed = [e for e in evs if e["host"] == "allowed.test"]
    assert len(allowed) == 3 and all(e["decision"] == "ALLOW" for e in allowed), allowed
    assert all(e["port"] == http_host for e in allowed)
    assert max(e["bytes_down"] for e in allowed) > 3 * 1024 * 1024
    assert max(e["bytes_up"] for e in allowed) > 2 * 1024 * 1024
    assert by_host["other.test"]["decision"] == "DENY"
    assert by_host["other.test"]["reason"] == "not-allowlisted"
    assert len(evs) == 4
    # Disposed: nothing of the VM is left.
    assert os.listdir(os.path.join(state, "vm")) == []
