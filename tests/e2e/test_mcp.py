"""`msb mcp` driven by the official MCP TypeScript SDK client (issue 10).

tests/mcp-client pins @modelcontextprotocol/sdk (package-lock.json); the suite
installs it with `npm ci` once into the build directory and runs client.mjs,
which connects over stdio, initializes, lists the tools and calls them. A few
protocol details (version negotiation, unknown tools) are also checked on the
raw wire.
"""
import filecmp
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import BUILD, ROOT
from leaks import checked_state_root

MSB = os.path.join(BUILD, "cli", "msb")
SRC = os.path.join(ROOT, "tests", "mcp-client")
CACHE = os.path.join(BUILD, "mcp-client")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the ns backend runs as root here")


@pytest.fixture(scope="session")
def sdk_client():
    """client.mjs with the pinned SDK installed (npm ci, cached under the build dir)."""
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.fail("node and npm are required: run scripts/install-deps")
    os.makedirs(CACHE, exist_ok=True)
    stale = not os.path.isdir(os.path.join(CACHE, "node_modules"))
    for name in ("package.json", "package-lock.json"):
        dst = os.path.join(CACHE, name)
        if not os.path.exists(dst) or not filecmp.cmp(os.path.join(SRC, name), dst,
                                                      shallow=False):
            shutil.copy(os.path.join(SRC, name), dst)
            stale = True
    shutil.copy(os.path.join(SRC, "client.mjs"), os.path.join(CACHE, "client.mjs"))
    if stale:
        p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=CACHE,
                           capture_output=True, timeout=600)
        assert p.returncode == 0, p.stderr.decode()
    return os.path.join(CACHE, "client.mjs")


def drive(sdk_client, plan, *args, env=None, timeout=120):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(plan, f)
    try:
        p = subprocess.run(["node", sdk_client, f.name, MSB, *args], capture_output=True,
                           timeout=timeout, env=env, cwd=CACHE)
    finally:
        os.unlink(f.name)
    assert p.returncode == 0, p.stderr.decode()
    assert b"Sanitizer" not in p.stderr and b"runtime error:" not in p.stderr, p.stderr.decode()
    return json.loads(p.stdout)


def text(result):
    return "".join(c["text"] for c in result["content"] if c["type"] == "text")


@pytest.fixture
def state():
    yield from checked_state_root("/tmp/msb-mcp-")


@needs_root
def test_sdk_client_initializes_lists_and_calls_tools(sdk_client, state, tmp_path):
    events = tmp_path / "events.jsonl"
    plan = [
        {"tool": "write_file", "arguments": {"path": "hello.txt", "content": "hi there\n"}},
        {"tool": "execute", "arguments": {"command": "cat hello.txt; echo oops >&2; exit 3"}},
        {"tool": "read_file", "arguments": {"path": "hello.txt"}},
        {"tool": "write_file", "arguments": {"path": "b.bin", "content": "AP8=",
                                             "encoding": "base64"}},
        {"tool": "execute", "arguments": {"command": "od -An -tx1 b.bin"}},
        {"tool": "list_files", "arguments": {}},
        {"tool": "read_file", "arguments": {"path": "missing.txt"}},
        {"tool": "execute", "arguments": {}},
        {"tool": "no_such_tool", "arguments": {}},
        # A policy refusal: the spec's files_out cap (8 MiB per file, 9.23).
        {"tool": "execute", "arguments": {"command": "head -c 9000000 /dev/zero > big"}},
        {"tool": "read_file", "arguments": {"path": "big"}},
        {"tool": "dispose", "arguments": {}},
        {"tool": "list_files", "arguments": {}},
    ]
    out = drive(sdk_client, plan, "--min-isolation", "container", "--state-dir", state,
                "--events", str(events))
    assert out["server"]["name"] == "msb"
    assert "tools" in out["capabilities"]
    tools = {t["name"]: t for t in out["tools"]}
    assert set(tools) == {"execute", "write_file", "read_file", "list_files", "collect_outputs",
                          "dispose"}
    assert tools["execute"]["inputSchema"]["required"] == ["command"]
    assert tools["write_file"]["inputSchema"]["properties"]["encoding"]["enum"] == [
        "utf-8", "base64"]
    assert tools["read_file"]["annotations"]["readOnlyHint"] is True
    assert tools["execute"]["annotations"]["destructiveHint"] is True

    c = [x.get("result", x) for x in out["calls"]]
    assert not c[0]["isError"] and "9 bytes" in text(c[0])
    assert not c[1]["isError"]
    assert text(c[1]).startswith("hi there\n") and "oops" in text(c[1])
    assert c[1]["structuredContent"]["exit_code"] == 3
    assert text(c[2]) == "hi there\n" and not c[2]["isError"]
    assert text(c[4]).split()[:2] == ["00", "ff"]
    names = text(c[5])
    assert "hello.txt" in names and "b.bin" in names
    assert c[6]["isError"] and text(c[6]).startswith("FileNotFoundError:")
    assert c[6]["structuredContent"]["error"]["name"] == "FileNotFoundError"
    assert c[7]["isError"] and "`command` is required" in text(c[7])
    assert c[8]["error"]["code"] == -32602 and "no_such_tool" in c[8]["error"]["message"]
    assert not c[9]["isError"]
    assert c[10]["isError"] and text(c[10]).startswith("SandboxTransferCapExceeded:")
    assert c[10]["structuredContent"]["error"]["payload"]["cap"] == "max_bytes_per_file"
    assert not c[11]["isError"]
    assert text(c[12]) == "(empty)"  # a fresh sandbox after dispose

    # Every call was keyed to this MCP session as the conversation.
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    threads = {e["key"]["thread_id"] for e in lines if e["event"] == "SandboxAcquired"}
    assert len(threads) == 1
    assert all(e["key"]["scope"] == "mcp" for e in lines if "key" in e and e["key"])


def test_sdk_client_gets_a_policy_refusal_as_a_tool_error_6_10(sdk_client, tmp_path):
    state = tempfile.mkdtemp(prefix="/tmp/msb-mcp-")  # short: unix socket paths
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({
        "router": {"min_isolation": "container",
                   "backends": [{"type": "ns", "state_dir": str(state)}]},
        # ns enforces closed and allowlist (issue 6), never unrestricted.
        "spec": {"kind": "net", "egress": "unrestricted",
                 "requires": ["exec", "files_in", "files_out"]},
    }))
    plan = [{"tool": "execute", "arguments": {"command": "true"}},
            {"tool": "read_file", "arguments": {"path": "x"}}]
    out = drive(sdk_client, plan, "--config", str(config))
    for call in out["calls"]:
        r = call["result"]
        assert r["isError"] is True
        assert text(r).startswith("SandboxEgressNotEnforced: ")
        assert "cannot enforce the 'unrestricted' egress" in text(r)
        err = r["structuredContent"]["error"]
        assert err["name"] == "SandboxEgressNotEnforced" and "permission" in err["categories"]
    # Refused before any backend work: nothing was created.
    assert not os.path.exists(os.path.join(state, "ns")) or not os.listdir(
        os.path.join(state, "ns"))
    shutil.rmtree(state)


def raw_session(*lines, args=("--config",)):
    """Send each message in turn, waiting for a request's response before the
    next message (as an MCP client does); every message read back, in order."""
    p = subprocess.Popen([MSB, "mcp", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    out = []
    try:
        for msg in lines:
            p.stdin.write(json.dumps(msg).encode() + b"\n")
            p.stdin.flush()
            if "id" in msg:
                while True:
                    line = p.stdout.readline()
                    assert line, "msb mcp exited"
                    out.append(json.loads(line))
                    if out[-1].get("id") == msg["id"]:
                        break
        p.stdin.close()
        out += [json.loads(x) for x in p.stdout.read().splitlines()]
        assert p.wait(60) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return out


@pytest.fixture
def fake_config(tmp_path):
    p = tmp_path / "fake.json"
    p.write_text(json.dumps({"router": {"min_isolation": "none",
                                        "backends": [{"type": "fake"}]},
                             "spec": {"kind": "mcp", "requires": ["exec"]}}))
    return str(p)


@pytest.mark.parametrize("asked, answered", [
    ("2024-11-05", "2024-11-05"), ("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"),
    ("1999-01-01", "2025-11-25"),
])
def test_protocol_version_negotiation(fake_config, asked, answered):
    out = raw_session({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": asked, "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "0"}}},
                      {"jsonrpc": "2.0", "method": "notifications/initialized"},
                      {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "execute", "arguments": {"command": "true"}}},
                      args=("--config", fake_config))
    assert out[0]["result"]["protocolVersion"] == answered
    assert out[0]["result"]["serverInfo"]["name"] == "msb"
    # structuredContent exists from 2025-06-18 on; older sessions do not get it.
    assert ("structuredContent" in out[1]["result"]) == (answered >= "2025-06-18")


def test_only_ping_is_served_before_initialize(fake_config):
    # The MCP lifecycle: a client that skips the handshake is told so, and
    # nothing runs; after initialize the same call is served.
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"command": "true"}}}
    init = {"jsonrpc": "2.0", "id": 4, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}
    out = raw_session({"jsonrpc": "2.0", "id": 1, "method": "ping"}, call,
                      {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, init,
                      dict(call, id=5), args=("--config", fake_config))
    by_id = {m["id"]: m for m in out}
    assert by_id[1]["result"] == {}
    for i in (2, 3):
        assert by_id[i]["error"]["code"] == -32600
        assert "not initialized" in by_id[i]["error"]["message"]
    assert by_id[5]["result"]["isError"] is False


def test_raw_wire_errors_and_ping(fake_config):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}
    out = raw_session(init, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                      {"jsonrpc": "2.0", "id": 2, "method": "ping"},
                      {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                       "params": {"name": "nope"}},
                      {"jsonrpc": "2.0", "id": 4, "method": "resources/list"},
                      {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                       "params": {"name": "execute", "arguments": {"command": "true"}}},
                      {"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": 9}},
                      args=("--config", fake_config))
    by_id = {m["id"]: m for m in out}
    assert len(out) == 5  # the notifications got no answer
    assert by_id[2]["result"] == {}
    assert by_id[3]["error"]["code"] == -32602
    assert by_id[4]["error"]["code"] == -32601
    assert by_id[5]["result"]["isError"] is False
    assert "exit code: 0" in by_id[5]["result"]["content"][0]["text"]


def test_an_embedded_nul_is_refused_never_cut_short(fake_config):
    """(issue 15 finding 8) A NUL inside the method, jsonrpc, a tool name or a
    path is refused naming the member, never read as the prefix before it."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}
    out = raw_session(init,
                      {"jsonrpc": "2.0", "id": 2, "method": "ping\u0000evil"},
                      {"jsonrpc": "2.0\u0000", "id": 3, "method": "ping"},
                      {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                       "params": {"name": "write_file",
                                  "arguments": {"path": "a.txt", "content": "hi"}}},
                      {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                       "params": {"name": "read_file\u0000x", "arguments": {"path": "a.txt"}}},
                      {"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                       "params": {"name": "read_file", "arguments": {"path": "a.txt\u0000x"}}},
                      {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": "read_file", "arguments": {"path": "a.txt"}}},
                      args=("--config", fake_config))
    by_id = {m["id"]: m for m in out}
    assert by_id[2]["error"]["code"] == -32600 and "method" in by_id[2]["error"]["message"]
    assert by_id[3]["error"]["code"] == -32600 and "jsonrpc" in by_id[3]["error"]["message"]
    assert by_id[4]["result"]["isError"] is False
    assert by_id[5]["error"]["code"] == -32602 and "`name`" in by_id[5]["error"]["message"]
    assert by_id[6]["result"]["isError"] is True and "`path`" in text(by_id[6]["result"])
    assert text(by_id[7]["result"]) == "hi"


def test_read_file_through_a_trailing_slash_is_refused(fake_config):
    """(issue 15 finding 9) "a.txt/" names a directory: the file plane does not
    read the file a.txt through it."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}

    def call(i, name, **arguments):
        return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}
    out = raw_session(init, call(2, "write_file", path="a.txt", content="hi"),
                      call(3, "read_file", path="a.txt/"),
                      call(4, "write_file", path="a.txt/", content="no"),
                      call(5, "read_file", path="a.txt"), args=("--config", fake_config))
    by_id = {m["id"]: m["result"] for m in out}
    for i in (3, 4):
        assert by_id[i]["isError"] is True, by_id[i]
        assert text(by_id[i]).startswith("ValueError: ") and "names a directory" in text(
            by_id[i])
    assert text(by_id[5]) == "hi"


def test_config_errors_fail_at_start(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"router": {}, "extra": 1}))
    p = subprocess.run([MSB, "mcp", "--config", str(bad)], capture_output=True,
                       input=b"", timeout=30)
    assert p.returncode == 2 and b"unknown key `extra`" in p.stderr
    bad.write_text(json.dumps({"router": {"backends": [{"type": "fake"}]}}))
    p = subprocess.run([MSB, "mcp", "--config", str(bad)], capture_output=True,
                       input=b"", timeout=30)
    assert p.returncode == 3 and b"SandboxBackendNotPermitted" in p.stderr


@needs_root
def test_resource_options_reach_the_sandbox(state):
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}
    out = raw_session(init, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"name": "execute", "arguments": {
                                 "command": "for i in $(seq 40); do sleep 1 & done 2>/dev/null; "
                                            "wait"}}},
                      args=("--min-isolation", "container", "--state-dir", state,
                            "--pids", "16", "--memory", "64M"))
    r = out[1]["result"]
    assert r["structuredContent"]["pids_exhausted"] is True
    assert "the process limit refused a fork" in r["content"][0]["text"]
    p = subprocess.run([MSB, "mcp", "--config", "x.json", "--pids", "3"], capture_output=True,
                       input=b"", timeout=30)
    assert p.returncode == 2 and b"--config replaces" in p.stderr


def test_sdk_client_collects_outputs_into_the_configured_sink_12_26(sdk_client, tmp_path):
    """collect_outputs lands in the server's --sink/config sink, never a directory
    the model names; the model sees displays, never the host path."""
    import hashlib
    sink = tmp_path / "sink"
    sink.mkdir()
    config = tmp_path / "mcp.json"
    spec = {"kind": "mcp",
            "declared_outputs": [{"path": "out/report.txt", "media_type": "text/plain"}],
            "outputs_named_at_call_time": True, "files_out": {"max_bytes_per_file": 64}}
    config.write_text(json.dumps({"router": {"min_isolation": "none",
                                             "backends": [{"type": "fake"}]},
                                  "spec": spec, "sink": str(sink)}))
    plan = [
        {"tool": "collect_outputs", "arguments": {}},  # nothing written yet: required, missing
        {"tool": "write_file", "arguments": {"path": "out/report.txt", "content": "done\n"}},
        {"tool": "write_file", "arguments": {"path": "extra.csv", "content": "a,b\n"}},
        {"tool": "collect_outputs", "arguments": {"outputs": [{"path": "extra.csv"}]}},
        {"tool": "collect_outputs", "arguments": {}},  # lands again: the file exists
        {"tool": "write_file", "arguments": {"path": "big", "content": "x" * 100}},
        {"tool": "collect_outputs", "arguments": {"outputs": [{"path": "big", "name": "b"}]}},
        {"tool": "collect_outputs", "arguments": {"sink": "/tmp"}},
        {"tool": "collect_outputs", "arguments": {"outputs": [{"name": "no path"}]}},
    ]
    out = drive(sdk_client, plan, "--config", str(config))
    tools = {t["name"]: t for t in out["tools"]}
    schema = tools["collect_outputs"]["inputSchema"]
    assert set(schema["properties"]) == {"outputs"} and schema["additionalProperties"] is False
    c = [x.get("result", x) for x in out["calls"]]
    assert c[0]["isError"] and text(c[0]).startswith("SandboxOutputMissing:")
    assert not c[3]["isError"], c[3]
    arts = c[3]["structuredContent"]["artifacts"]
    assert [a["name"] for a in arts] == ["out/report.txt", "extra.csv"]
    assert arts[0]["sha256"] == hashlib.sha256(b"done\n").hexdigest()
    assert all("handle" not in a for a in arts) and str(sink) not in text(c[3])
    assert (sink / "out" / "report.txt").read_text() == "done\n"
    assert (sink / "extra.csv").read_text() == "a,b\n"
    assert c[4]["isError"] and text(c[4]).startswith("SandboxLandingExists:")
    assert c[6]["isError"] and text(c[6]).startswith("SandboxTransferCapExceeded:")
    assert c[6]["structuredContent"]["error"]["payload"]["file"] == "big"
    assert not (sink / "b").exists()
    assert c[7]["isError"] and "unknown argument `sink`" in text(c[7])
    assert c[8]["isError"] and "invalid arguments" in text(c[8])


def test_collect_outputs_without_a_sink_is_refused_12_30(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({
        "router": {"min_isolation": "none", "backends": [{"type": "fake"}]},
        "spec": {"kind": "mcp", "declared_outputs": [{"path": "r.txt"}]}}))
    out = raw_session(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "collect_outputs", "arguments": {}}},
        args=("--config", str(config)))
    r = [m for m in out if m.get("id") == 2][0]["result"]
    assert r["isError"] and text(r).startswith("SandboxOutputSinkRequired:")
    # A sink that is not a directory stops the server at start.
    p = subprocess.run([MSB, "mcp", "--config", str(config), "--sink",
                        str(tmp_path / "absent")], capture_output=True, input=b"", timeout=30)
    assert p.returncode != 0
