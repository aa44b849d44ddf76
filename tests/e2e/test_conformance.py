"""`msb conformance` end to end (checklist section 18, issue 9).

The suites run through the real binary against the fake (its emulated POSIX
guest) and against `ns`; every suite a backend declares must pass, a suite it
does not declare runs nothing and says so, and a lie in the declarations is
caught with a nonzero exit naming the probe.
"""
import http.server
import json
import os
import shutil
import subprocess
import threading

import pytest

from leaks import checked_state_root

ALL_SUITES = {"FILES_IN", "FILES_OUT", "EXEC", "FILES_DELETE", "EGRESS", "CALL_SCOPE",
              "RECLAIM", "NOTHING_LEFT_BEHIND"}
PROBES = {"FILES_IN": 12, "FILES_OUT": 12, "EXEC": 5, "FILES_DELETE": 10, "RECLAIM": 7,
          "CALL_SCOPE": 4, "NOTHING_LEFT_BEHIND": 2, "EGRESS": 2}


def run_json(msb, *args, timeout=120):
    p = msb("conformance", *args, "--json", timeout=timeout)
    assert p.stdout, p.stderr
    return p, json.loads(p.stdout)


def suites(doc):
    return {s["suite"]: s for s in doc["suites"]}


def assert_all_passed(suite):
    assert suite["ran"], suite
    bad = [r for r in suite["results"] if r["outcome"] != "passed"]
    assert not bad, bad
    assert suite["total"] == PROBES[suite["suite"]]
    for r in suite["results"]:
        assert len(r["why"]) > 20, r  # every probe carries its reason


def test_fake_passes_every_suite_it_declares(msb):
    p, doc = run_json(msb, "fake")
    assert p.returncode == 0, p.stderr
    s = suites(doc)
    assert set(s) == ALL_SUITES
    # The fake declares exec, files_in and reclaim (19.2, 23.37).
    for name in ("FILES_IN", "EXEC", "RECLAIM", "NOTHING_LEFT_BEHIND"):
        assert_all_passed(s[name])
    assert not s["FILES_OUT"]["ran"] and "files_out" in s["FILES_OUT"]["reason"]
    assert not s["CALL_SCOPE"]["ran"]
    # Declared (allowlist) but no URLs given: said, not passed.
    assert not s["EGRESS"]["ran"] and "--allowed-url" in s["EGRESS"]["reason"]
    assert doc["failed"] == 0 and doc["passed"] == 12 + 5 + 7 + 2


def test_fake_with_the_whole_file_plane_declared(msb, write_json):
    cfg = write_json("fake.json", {"declarations": {
        "capabilities": ["exec", "files_in", "files_out", "files_list", "files_delete",
                         "reclaim"],
        "egress_modes": ["closed"]}})
    p, doc = run_json(msb, "fake", "--config", cfg)
    assert p.returncode == 0, p.stderr
    s = suites(doc)
    for name in ("FILES_IN", "FILES_OUT", "FILES_DELETE", "EXEC", "RECLAIM"):
        assert_all_passed(s[name])
    assert "allowlist" in s["EGRESS"]["reason"]


def test_a_false_call_scope_claim_fails_naming_the_probe(msb, write_json):
    # The fake hands every key one shared sandbox (19.4); declaring the call
    # scope over it is the lie CALL_SCOPE exists to catch (18.10).
    cfg = write_json("fake.json", {"declarations": {
        "capabilities": ["exec", "files_in", "reclaim"],
        "egress_modes": ["closed"], "isolation_scopes": ["conversation", "call"]}})
    p = msb("conformance", "fake", "--config", cfg, "--suite", "call_scope")
    assert p.returncode == 9, (p.stdout, p.stderr)
    out = p.stdout.decode()
    assert "two-calls-get-two-instances" in out and "failed" in out
    assert "a-file-from-one-call-is-absent-from-another" in out
    assert "fake: 2 passed, 2 failed, 0 skipped" in out


def test_egress_on_a_guest_without_curl_fails_18_9(msb):
    p, doc = run_json(msb, "fake", "--suite", "egress", "--allowed-url",
                      "http://allowed.test/", "--denied-url", "http://denied.test/")
    assert p.returncode == 9
    eg = suites(doc)["EGRESS"]
    allowed = next(r for r in eg["results"] if r["probe"] == "an-allowed-host-is-reachable")
    assert allowed["outcome"] == "failed" and "curl" in allowed["detail"]


def test_table_has_one_row_per_probe_and_a_summary(msb):
    p = msb("conformance", "fake", "--suite", "EXEC", "--suite", "files_in")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.decode().splitlines()
    assert lines[0].split()[:4] == ["SUITE", "PROBE", "OUTCOME", "REASON"]
    rows = [line for line in lines[1:] if line.startswith(("EXEC ", "FILES_IN "))]
    assert len(rows) == 5 + 12
    assert any(r.split()[1] == "argv-is-quoted" and r.split()[2] == "passed" for r in rows)
    assert lines[-1] == "fake: 17 passed, 0 failed, 0 skipped"


def test_usage_errors(msb):
    assert msb("conformance").returncode == 2
    p = msb("conformance", "nosuch")
    # The type is looked up in the backend-type table, before any output.
    assert p.returncode == 2 and not p.stdout, p.stdout
    assert b"`nosuch` is not a backend type: expected one of `declared`, `fake`, `ns`, `oci`" in p.stderr
    assert msb("conformance", "fake", "--suite", "network").returncode == 2
    p = msb("conformance", "fake", "--allowed-url", "http://a.test/")
    assert p.returncode == 2 and b"go together" in p.stderr


def test_config_is_backend_json(msb, write_json):
    # --config takes the object a router's `backends` list takes; its type
    # names the backend, and BACKEND may then be left out (issue 14).
    cfg = write_json("fake.json", {"type": "fake", "posix_guest": True,
                                   "declarations": {"capabilities": ["exec", "reclaim"],
                                                    "egress_modes": ["closed"]}})
    p, doc = run_json(msb, "--config", cfg, "--suite", "exec")
    assert p.returncode == 0, p.stderr
    assert doc["backend"] == "fake" and doc["passed"] == PROBES["EXEC"]
    p = msb("conformance", "ns", "--config", cfg)
    assert p.returncode == 2 and b"is not a `ns` backend" in p.stderr, p.stderr
    # The flags write over the JSON's keys; a type without the key refuses it.
    p = msb("conformance", "fake", "--state-dir", "/tmp/x")
    assert p.returncode == 2 and b"unknown key `state_dir`" in p.stderr, p.stderr
    p = msb("conformance", "fake", "--config", write_json("bad.json", {"colour": 1}))
    assert p.returncode == 2 and b"backend: unknown key `colour`" in p.stderr, p.stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="becomes nobody with setpriv")
@pytest.mark.parametrize("args", [("conformance", "ns"), ("conformance", "--escape", "ns"),
                                  ("ls",), ("purge", "--thread", "t")])
def test_ns_state_root_of_an_ordinary_user_without_xdg_runtime_dir(msb, args):
    # One state-root rule, the ns backend's (ns_state.c): an ordinary user
    # with neither MSB_STATE_DIR nor XDG_RUNTIME_DIR is refused - never sent
    # to /run/msb, which is root's - and before anything is printed.
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "env", "-i", "PATH=/usr/bin:/bin", msb.path, *args],
                       capture_output=True, timeout=60)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert not p.stdout, p.stdout
    assert b"no state directory: set MSB_STATE_DIR or XDG_RUNTIME_DIR" in p.stderr, p.stderr


# ---- ns ------------------------------------------------------------------------------

ns = pytest.mark.skipif(os.geteuid() != 0, reason="the ns conformance run needs root")


@pytest.fixture
def state():
    yield from checked_state_root("/tmp/msb-conf-e2e-")


@ns
def test_ns_passes_every_suite_it_declares(msb, state):
    p, doc = run_json(msb, "ns", "--state-dir", state, timeout=300)
    assert p.returncode == 0, (doc, p.stderr)
    s = suites(doc)
    for name in ("FILES_IN", "FILES_OUT", "EXEC", "FILES_DELETE", "RECLAIM", "CALL_SCOPE",
                 "NOTHING_LEFT_BEHIND"):
        assert_all_passed(s[name])
    assert doc["skipped"] == 0
    # EGRESS is declared (allowlist) but needs URLs to test: said, not passed.
    assert not s["EGRESS"]["ran"] and "--allowed-url" in s["EGRESS"]["reason"]
    # Every sandbox a suite made is disposed.
    assert os.listdir(os.path.join(state, "ns")) == []


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *a):
        pass


@pytest.fixture
def http_host():
    """One HTTP server on the host's loopback that answers 2xx to anyone who
    reaches it: both URLs of the EGRESS suite point at it under two names, so
    only the allowlist can tell them apart (18.9)."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@ns
@pytest.mark.skipif(shutil.which("curl") is None, reason="the EGRESS suite runs curl in the guest")
def test_ns_passes_the_egress_suite_18_9(msb, state, write_json, http_host):
    # The proxy refuses loopback destinations unless the backend's egress
    # configuration names them; the two names are pinned in its hosts map.
    cfg = write_json("ns.json", {"state_dir": state, "egress": {
        "allow_cidrs": ["127.0.0.0/8"],
        "hosts": {"allowed.test": ["127.0.0.1"], "denied.test": ["127.0.0.1"]}}})
    p, doc = run_json(msb, "ns", "--config", cfg, "--suite", "egress",
                      "--allowed-url", f"http://allowed.test:{http_host}/",
                      "--denied-url", f"http://denied.test:{http_host}/", timeout=120)
    assert p.returncode == 0, (doc, p.stderr)
    assert_all_passed(suites(doc)["EGRESS"])
    assert os.listdir(os.path.join(state, "ns")) == []


@ns
def test_ns_egress_suite_fails_when_the_denied_host_is_listed_too(msb, state, write_json,
                                                                 http_host):
    # The probe can fail: with both names resolving to the answering host and
    # the "denied" one inside the allowed suffix, the denied URL answers.
    cfg = write_json("ns.json", {"state_dir": state, "egress": {
        "allow_cidrs": ["127.0.0.0/8"],
        "hosts": {"allowed.test": ["127.0.0.1"]}}})
    p, doc = run_json(msb, "ns", "--config", cfg, "--suite", "egress",
                      "--allowed-url", f"http://allowed.test:{http_host}/",
                      "--denied-url", f"http://allowed.test:{http_host}/other", timeout=120)
    assert p.returncode == 9, (doc, p.stderr)
    bad = [r["probe"] for r in suites(doc)["EGRESS"]["results"] if r["outcome"] == "failed"]
    assert bad == ["a-denied-host-is-refused"], doc
