"""The `ns` warm pool through the CLI, end to end (issue 17, docs/pool.md).

`msb pool fill` makes ready sandboxes of the template `msb run` uses, `msb
run` and `msb acquire` claim them (the sandbox answers under the key's name),
`pool_size` in the backend JSON refills after a claim, an allowlist sandbox
taken from the pool enforces the rules of the spec that claimed it (not
those of the fill), and `msb pool drain` and `msb dispose` leave nothing:
no process, mount, cgroup or state (leaks.py, which names a pooled
sandbox's cgroup as a keyed one of the same state root).
"""
import json
import os
import re
import select
import subprocess
import time

import pytest

from leaks import Snapshot, checked_state_root
from test_egress import GUEST_GET, egress_config, servers  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the ns e2e suite runs as root")

FLOOR = ["--min-isolation", "container"]
NAME = re.compile(r"^msb-[0-9a-f]{32}$")


@pytest.fixture
def state():
    yield from checked_state_root("/tmp/msb-e2e-pool-")


def pool_ls(msb, *flags):
    p, out = msb.json("pool", "ls", "--json", *flags)
    assert p.returncode == 0, p.stderr
    return out


def wait_ready(msb, n, *flags, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready = [e for e in pool_ls(msb, *flags) if e["pool"]["state"] == "ready"]
        if len(ready) >= n:
            return ready
        time.sleep(0.05)
    raise AssertionError(f"the pool did not have {n} ready in {seconds} s: "
                         f"{pool_ls(msb, *flags)}")


def test_fill_ls_run_drain_leaves_nothing(msb, state):
    before = Snapshot.take(state)
    p = msb("pool", "fill", "--state-dir", state, "--size", "2")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"2 pooled sandboxes started\n"
    pooled = pool_ls(msb, "--state-dir", state)
    assert [e["pool"]["state"] for e in pooled] == ["ready", "ready"]
    names = {e["name"] for e in pooled}
    assert all(NAME.match(n) for n in names)
    # msb ls counts them, as pooled.
    p, ls = msb.json("ls", "--state-dir", state, "--json")
    assert sorted(e["state"] for e in ls) == ["pooled", "pooled"]

    # A run claims one: it answers under its key's name, not the pool's.
    p = msb("run", *FLOOR, "--state-dir", state, "--", "sh", "-c",
            "hostname; cat /etc/hostname; ls -A /maf-sandbox/work | wc -l")
    assert p.returncode == 0, p.stderr
    host, etc, files = p.stdout.decode().split("\n")[:3]
    assert NAME.match(host) and host not in names and etc == host and files == "0"
    # The other stays, and `msb run` (built-in pool_size 2) starts one behind it.
    left = pool_ls(msb, "--state-dir", state)
    assert len(left) == 2 and len({e["name"] for e in left} & names) == 1

    p = msb("pool", "drain", "--state-dir", state)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"2 pooled sandboxes removed\n"
    assert pool_ls(msb, "--state-dir", state) == []
    assert not os.path.exists(os.path.join(state, "ns", "pool"))
    assert Snapshot.take(state).leaked_since(before) == []


def test_pool_size_refills_after_a_claim(msb, state, write_json):
    cfg = write_json("ns.json", {"type": "ns", "state_dir": state, "pool_size": 1})
    # The first run finds no pool: it makes its sandbox, and one for the pool.
    p = msb("run", *FLOOR, "--config", cfg, "--", "true")
    assert p.returncode == 0, p.stderr
    first = wait_ready(msb, 1, "--config", cfg)[0]
    # The next one takes it, and the pool is filled again behind it.
    p = msb("run", *FLOOR, "--config", cfg, "--", "hostname")
    assert p.returncode == 0, p.stderr
    again = wait_ready(msb, 1, "--config", cfg)
    assert len(again) == 1 and again[0]["name"] != first["name"]
    p = msb("pool", "drain", "--config", cfg)
    assert p.returncode == 0, p.stderr
    assert pool_ls(msb, "--config", cfg) == []


def test_dispose_of_a_claimed_sandbox_leaves_nothing(msb, state):
    before = Snapshot.take(state)
    assert msb("pool", "fill", "--state-dir", state, "--size", "1").returncode == 0
    p = msb("acquire", *FLOOR, "--state-dir", state, "--thread", "t1", "--json")
    assert p.returncode == 0, p.stderr
    assert pool_ls(msb, "--state-dir", state) == []
    p, ls = msb.json("ls", "--state-dir", state, "--json")
    assert [(e["thread_id"], e["state"]) for e in ls] == [("t1", "running")]
    p = msb("dispose", "--state-dir", state, "--thread", "t1")
    assert p.returncode == 0, p.stderr
    p, ls = msb.json("ls", "--state-dir", state, "--json")
    assert ls == []
    # The claim took the last one and no refill comes: no empty pool stays.
    assert not os.path.exists(os.path.join(state, "ns", "pool"))
    assert Snapshot.take(state).leaked_since(before) == []


def test_claimed_allowlist_sandbox_enforces_the_claimers_rules(msb, state, servers):  # noqa: F811
    plain, _ = servers
    cfg = egress_config(state)
    # Filled for an allowlist spec naming allowed.test: the mode is pooled,
    # the rules are not.
    p = msb("pool", "fill", "--state-dir", state, "--size", "1", "--egress-config", cfg,
            "--allow", "allowed.test")
    assert p.returncode == 0, p.stderr
    pooled = pool_ls(msb, "--state-dir", state)
    assert len(pooled) == 1
    reqs = [["other", "GET", f"http://other.test:{plain.port}/"],
            ["allowed", "GET", f"http://allowed.test:{plain.port}/"]]
    p = msb("run", *FLOOR, "--state-dir", state, "--egress-config", cfg, "--allow",
            "other.test", "--", "python3", "-c", GUEST_GET, json.dumps(reqs), timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert pooled[0]["name"] not in {e["name"] for e in pool_ls(msb, "--state-dir", state)}, \
        "the run did not claim the pooled one"
    assert out["other"][0] == 200, out
    assert out["allowed"][0] == 403, out
    assert out["env"]["HTTP_PROXY"], out
    assert msb("pool", "drain", "--state-dir", state).returncode == 0


def test_configuration_default_pool_size_pools_msb_run(msb, state, write_json):
    # defaults.pool_size in the configuration file (docs/cli.md) is the pool
    # of an ns backend JSON that names none: `msb run` leaves one starting.
    conf = write_json("config.json", {"router": {"min_isolation": "container"},
                                      "defaults": {"pool_size": 1}})
    env = dict(os.environ, MSB_CONFIG=conf)
    p = msb("config", "show", "--json", "--state-dir", state, env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["values"]["backend.pool_size"] == {"value": 1,
                                                                  "source": "file"}
    p = msb("run", "--state-dir", state, "--", "true", env=env)
    assert p.returncode == 0, p.stderr
    first = wait_ready(msb, 1, "--state-dir", state)[0]
    # The next run claims it; a backend JSON's own pool_size (0) wins.
    p = msb("run", "--state-dir", state, "--", "true", env=env)
    assert p.returncode == 0, p.stderr
    again = wait_ready(msb, 1, "--state-dir", state)
    assert len(again) == 1 and again[0]["name"] != first["name"]
    cfg = write_json("ns.json", {"type": "ns", "state_dir": state, "pool_size": 0})
    p = msb("run", "--config", cfg, "--", "true", env=env)
    assert p.returncode == 0, p.stderr
    assert pool_ls(msb, "--state-dir", state) == []
    assert msb("pool", "drain", "--state-dir", state).returncode == 0


def test_msb_run_keeps_a_pool_of_two_by_default_and_purge_drains_it(msb, state, write_json):
    # Without a configuration file `msb run` keeps CLI_FRONT_POOL_SIZE (2)
    # warm sandboxes (docs/pool.md); the library and the other verbs none.
    before = Snapshot.take(state)
    p = msb("acquire", *FLOOR, "--state-dir", state, "--thread", "t1")
    assert p.returncode == 0, p.stderr
    assert pool_ls(msb, "--state-dir", state) == []  # acquire keeps no pool
    p = msb("run", *FLOOR, "--state-dir", state, "--", "true")
    assert p.returncode == 0, p.stderr
    first = wait_ready(msb, 2, "--state-dir", state)
    p, ls = msb.json("ls", "--state-dir", state, "--json")
    assert sorted(e["state"] for e in ls) == ["pooled", "pooled", "running"]
    # The next run claims one of them and starts another.
    p = msb("run", *FLOOR, "--state-dir", state, "--", "hostname")
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().strip() not in {e["name"] for e in first}
    again = wait_ready(msb, 2, "--state-dir", state)
    assert len({e["name"] for e in again} - {e["name"] for e in first}) == 1
    # A purge takes the conversation's sandbox and the pool: nothing is left.
    p = msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "t1")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"disposed 1 sandbox(es)\nremoved 2 pooled sandboxes\n"
    assert pool_ls(msb, "--state-dir", state) == []
    assert not os.path.exists(os.path.join(state, "ns", "pool"))
    assert Snapshot.take(state).leaked_since(before) == []
    # defaults.pool_size 0 in the configuration file turns it off.
    conf = write_json("config.json", {"router": {"min_isolation": "container"},
                                      "defaults": {"pool_size": 0}})
    p = msb("run", "--state-dir", state, "--", "true", env=dict(os.environ, MSB_CONFIG=conf))
    assert p.returncode == 0, p.stderr
    assert not os.path.exists(os.path.join(state, "ns", "pool"))


def test_a_pipe_the_caller_leaks_ends_with_msb_run_not_with_its_pool(msb, state):
    # A caller that leaks a pipe's write end into `msb run` (pass_fds here;
    # a fork without close-on-exec in practice) reads that pipe's end when
    # msb exits: the warm sandboxes it leaves behind hold none of its
    # descriptors (the shims are started with nothing above fd 3).
    r, w = os.pipe()
    try:
        p = subprocess.Popen([msb.path, "run", *FLOOR, "--state-dir", state, "--", "true"],
                             pass_fds=(w,), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=dict(os.environ, MSB_CONFIG=""))
        os.close(w)
        w = -1
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        wait_ready(msb, 2, "--state-dir", state)  # the pool is up now
        ready, _, _ = select.select([r], [], [], 10)
        assert ready and os.read(r, 1) == b"", "a pooled sandbox holds the caller's pipe"
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
        assert msb("pool", "drain", "--state-dir", state).returncode == 0
