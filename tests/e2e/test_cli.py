"""The CLI a person expects (issue 16): the configuration file and its
precedence, `msb cp` and `msb files`, completion and the man page generated
from the verb tables, `msb ls` with backend, image, age and state, and the
image-unpack progress line on a terminal only.

Tests that make `ns` sandboxes run as root, each with its own state root and
the leak checker; the configuration, completion and man tests run as anyone.
"""
import json
import os
import pty
import select
import shutil
import subprocess
import time

import pytest

from conftest import ROOT
from leaks import checked_state_root

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="ns sandboxes: the e2e suite runs as root")
FLOOR = ["--min-isolation", "container"]


@pytest.fixture
def state():
    yield from checked_state_root("/tmp/msb-cli-")


@pytest.fixture
def cfg_env(tmp_path):
    """An environment whose configuration search the test controls: no
    $MSB_CONFIG, an empty XDG and HOME, and the system-wide file moved off
    /etc (MSB_SYSTEM_CONFIG, documented as a test hook) to a path that does
    not exist until the test writes it."""
    env = {k: v for k, v in os.environ.items() if k != "MSB_CONFIG"}
    (tmp_path / "xdg").mkdir()
    (tmp_path / "home").mkdir()
    env.update(XDG_CONFIG_HOME=str(tmp_path / "xdg"), HOME=str(tmp_path / "home"),
               MSB_SYSTEM_CONFIG=str(tmp_path / "etc-msb-config.json"))
    return env


def put(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


def show(msb, env, *flags):
    p, out = msb.json("config", "show", "--json", *flags, env=env)
    assert p.returncode == 0, p.stderr
    return out


def verbs_of(msb):
    text = msb("--help").stdout.decode()
    block = text.split("verbs:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines()]


# ---- the configuration file ----------------------------------------------------------------


def test_config_absent_keeps_the_microvm_floor_and_ns(msb, cfg_env):
    out = show(msb, cfg_env)
    assert out["file"] is None
    v = out["values"]
    assert v["router.min_isolation"] == {"value": "microvm", "source": "built-in default"}
    assert v["backend.type"] == {"value": "ns", "source": "built-in default"}
    assert v["defaults.pool_size"] == {"value": 2, "source": "built-in default"}


def test_help_names_this_platforms_default_backend(msb):
    # generated from the build's default (cli/meson.build), not written per
    # text: ns on Linux (tests/windows/test_serve_wine.py: wslc on Windows)
    assert "(default `ns`;" in msb("run", "--help").stdout.decode()
    assert "else {\"type\": \"ns\"}" in msb("ls", "--help").stdout.decode()
    assert "the backend is `ns`, this" in msb("config", "--help").stdout.decode()
    man = msb("man").stdout.decode()
    assert "XDG_CONFIG_HOME" in man and "APPDATA" not in man


def test_config_precedence_env_over_xdg_over_system(msb, cfg_env, tmp_path):
    system = put(cfg_env["MSB_SYSTEM_CONFIG"], {"router": {"min_isolation": "vm"}})
    out = show(msb, cfg_env)
    assert out["file"] == system and out["found_by"] == "$MSB_SYSTEM_CONFIG"
    assert out["values"]["router.min_isolation"] == {"value": "vm", "source": "file"}

    xdg = put(tmp_path / "xdg" / "msb" / "config.json",
              {"router": {"min_isolation": "container"}})
    out = show(msb, cfg_env)
    assert out["file"] == xdg and out["found_by"] == "$XDG_CONFIG_HOME"
    assert out["values"]["router.min_isolation"]["value"] == "container"

    env_file = put(tmp_path / "elsewhere.json", {"router": {"min_isolation": "none"}})
    out = show(msb, dict(cfg_env, MSB_CONFIG=env_file))
    assert out["file"] == env_file and out["found_by"] == "$MSB_CONFIG"
    assert out["values"]["router.min_isolation"]["value"] == "none"

    # Set and empty: no file at all, whatever else exists.
    out = show(msb, dict(cfg_env, MSB_CONFIG=""))
    assert out["file"] is None
    assert out["values"]["router.min_isolation"]["value"] == "microvm"

    # Without $XDG_CONFIG_HOME, ~/.config is the per-user place.
    env = {k: v for k, v in cfg_env.items() if k != "XDG_CONFIG_HOME"}
    home = put(tmp_path / "home" / ".config" / "msb" / "config.json",
               {"router": {"min_isolation": "hardened_container"}})
    out = show(msb, env)
    assert out["file"] == home and out["found_by"] == "$HOME/.config"

    # $MSB_CONFIG naming a missing file is an error, not a fall-through.
    p = msb("config", "show", env=dict(cfg_env, MSB_CONFIG=str(tmp_path / "nope.json")))
    assert p.returncode == 5 and b"does not exist" in p.stderr, p.stderr


def test_config_flag_beats_file_beats_default(msb, cfg_env, tmp_path):
    put(tmp_path / "xdg" / "msb" / "config.json", {
        "router": {"min_isolation": "container", "denied_capabilities": ["host_tools"]},
        "backend": {"type": "ns", "image": "host", "start_timeout": 12},
        "defaults": {"resources": {"memory_bytes": 268435456, "pids_max": 64},
                     "pool_size": 3}})
    v = show(msb, cfg_env, "--min-isolation", "vm", "--pids", "99", "--state-dir", "/tmp/x")[
        "values"]
    assert v["router.min_isolation"] == {"value": "vm", "source": "flag"}
    assert v["router.denied_capabilities"] == {"value": ["host_tools"], "source": "file"}
    assert v["router.selection"] == {"value": "fixed", "source": "built-in default"}
    assert v["backend.image"] == {"value": "host", "source": "file"}
    assert v["backend.start_timeout"] == {"value": 12, "source": "file"}
    assert v["backend.state_dir"] == {"value": "/tmp/x", "source": "flag"}
    assert v["backend.egress"] == {"value": None, "source": "built-in default"}
    assert v["defaults.resources.memory_bytes"] == {"value": 268435456, "source": "file"}
    assert v["defaults.resources.pids_max"] == {"value": 99, "source": "flag"}
    assert v["defaults.resources.cpu_millis"] == {"value": 0, "source": "built-in default"}
    assert v["defaults.pool_size"] == {"value": 3, "source": "file"}
    text = msb("config", "show", env=cfg_env).stdout.decode()
    assert "router.min_isolation" in text and "file" in text
    assert "the warm pool" in text and "docs/pool.md" in text  # what defaults.pool_size does


@pytest.mark.parametrize("doc, phrase", [
    ({"routr": {}}, "unknown key `routr`"),
    ({"router": {"min_isolation": "process"}}, "not a valid Isolation"),
    ({"router": {"backends": [{"type": "ns"}]}}, "the configuration's backend is `backend`"),
    ({"router": {"colour": 1}}, "unknown key `colour`"),
    ({"backend": {"image": "host"}}, "names no `type`"),
    ({"defaults": {"pool": 2}}, "unknown key `pool`"),
    ({"defaults": {"resources": {"memory": 1}}}, "unknown key `memory`"),
    ({"defaults": {"pool_size": -1}}, "non-negative integer"),
    ({"defaults": {"env": ["A=1"]}}, "defaults.env must be an object"),
    ({"defaults": {"env": {"N": 1}}}, "defaults.env.N: must be a string"),
    ({"defaults": {"env": {"HTTP_PROXY": "x"}}}, "`HTTP_PROXY` is reserved"),
    ("{not json", "not a JSON object"),
])
def test_config_is_strict(msb, cfg_env, tmp_path, doc, phrase):
    env = dict(cfg_env, MSB_CONFIG=put(tmp_path / "c.json", doc))
    for verb in (["config", "show"], ["check", "--spec", os.path.join(ROOT, "examples",
                                                                       "spec-basic.json")]):
        p = msb(*verb, env=env)
        assert p.returncode == 2, (verb, p.stdout, p.stderr)
        assert phrase.encode() in p.stderr, p.stderr
    # A backend key the type does not take is refused when the backend is made.
    env = dict(cfg_env, MSB_CONFIG=put(tmp_path / "k.json",
                                       {"backend": {"type": "ns", "colour": 1}}))
    p = msb("ls", env=env)
    assert p.returncode == 2 and b"unknown key `colour`" in p.stderr, p.stderr


def test_every_verb_reads_the_configured_backend(msb, cfg_env, tmp_path, write_json):
    # A fake backend and a floor of none in the file: exec, check and
    # conformance use them without a flag (one place: cli/backend_json.c).
    put(tmp_path / "xdg" / "msb" / "config.json", {
        "router": {"min_isolation": "none"},
        "backend": {"type": "fake", "posix_guest": True, "seed_files": [
            {"path": "/maf-sandbox/work/hello.txt", "text": "from the config"}]}})
    p = msb("exec", "--thread", "t", "--", "cat", "hello.txt", env=cfg_env)
    assert p.returncode == 0 and p.stdout == b"from the config", p.stderr
    p, out = msb.json("check", "--json", "--spec", write_json("s.json", {"kind": "k"}),
                      env=cfg_env)
    assert p.returncode == 0 and out["backend"] == "in-process", (p.stdout, p.stderr)
    # --config (a flag) replaces the file's backend wholesale.
    other = write_json("b.json", {"type": "fake", "name": "other", "posix_guest": True})
    p = msb("exec", "--config", other, "--thread", "t", "--", "cat", "hello.txt", env=cfg_env)
    assert p.returncode != 0, p.stdout


@root_only
def test_a_file_holding_only_the_floor_opts_down_and_keeps_ns(msb, cfg_env, tmp_path, state):
    # With no file the floor is microvm and ns is refused...
    p = msb("run", "--state-dir", state, "--", "true", env=cfg_env)
    assert p.returncode == 3 and b"minimum-isolation floor" in p.stderr, p.stderr
    assert b"configuration file" in p.stderr  # the refusal says how to opt down once
    # ...and the one-line file opts down, the default backend (ns) kept:
    # the README's example, exactly, with no flag but the test's state root.
    put(tmp_path / "xdg" / "msb" / "config.json", {"router": {"min_isolation": "container"}})
    p = msb("run", "--state-dir", state, "--", "python3", "-c", "print(6*7)", env=cfg_env)
    assert p.returncode == 0 and p.stdout == b"42\n", p.stderr
    p, out = msb.json("acquire", "--state-dir", state, "--thread", "c", "--json", env=cfg_env)
    assert p.returncode == 0 and out["backend"] == "ns", p.stderr
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "c",
               env=cfg_env).returncode == 0


@root_only
def test_env_defaults_from_the_file_under_the_flags(msb, cfg_env, tmp_path, state):
    # defaults.env is the spec's env (issue 16): every command starts from it,
    # --env wins name by name, and `config show` says where it came from.
    put(tmp_path / "xdg" / "msb" / "config.json", {
        "router": {"min_isolation": "container"},
        "defaults": {"env": {"FROM_FILE": "f", "BOTH": "file"}}})
    p = msb("run", "--state-dir", state, "--env", "BOTH=flag", "--", "sh", "-c",
            'printf "%s %s" "$FROM_FILE" "$BOTH"', env=cfg_env)
    assert p.returncode == 0 and p.stdout == b"f flag", p.stderr
    v = show(msb, cfg_env)["values"]
    assert v["defaults.env"] == {"value": {"FROM_FILE": "f", "BOTH": "file"}, "source": "file"}


@root_only
def test_spec_defaults_from_the_file_reach_the_spec(msb, cfg_env, tmp_path, state):
    # defaults.resources is the spec's: an out-of-range default is refused by
    # the spec's own rule, so it did reach the spec; a flag wins over it.
    put(tmp_path / "xdg" / "msb" / "config.json", {
        "router": {"min_isolation": "container"},
        "defaults": {"resources": {"pids_max": 1}}})
    p = msb("run", "--state-dir", state, "--", "true", env=cfg_env)
    assert p.returncode == 2 and b"pids_max: 1 is below the minimum" in p.stderr, p.stderr
    p = msb("run", "--state-dir", state, "--pids", "64", "--", "sh", "-c",
            "cat /sys/fs/cgroup/pids.max 2>/dev/null || echo n/a", env=cfg_env)
    assert p.returncode == 0, p.stderr


# ---- finding things: help, completion, man ----------------------------------------------------


def test_completion_names_every_verb_and_option(msb):
    verbs = verbs_of(msb)
    assert {"run", "exec", "cp", "files", "config", "completion", "man", "ls"} <= set(verbs)
    bash = msb("completion", "bash")
    zsh = msb("completion", "zsh")
    assert bash.returncode == 0 and zsh.returncode == 0
    for v in verbs:
        assert f"\t{v})".encode() in bash.stdout, v
        assert f"'{v}:".encode() in zsh.stdout, v
    # Every option --help lists is completed for that verb (the same table).
    text = bash.stdout.decode()
    for v in ("run", "exec", "cp", "files", "config", "check", "conformance", "mcp"):
        listed = [line.split()[0] for line in
                  msb(v, "--help").stdout.decode().split("options:\n", 1)[1].splitlines()
                  if line.startswith("  --")]
        assert listed, v
        section = text.split(f"\t{v})\n", 1)[1].split("\t\t;;\n", 1)[0]
        opts = section.split('opts="', 1)[1].split('"', 1)[0].split()
        assert set(listed) | {"--help"} == set(opts), (v, listed, opts)
    p = subprocess.run(["bash", "-n"], input=bash.stdout, capture_output=True)
    assert p.returncode == 0, p.stderr
    if shutil.which("zsh"):
        p = subprocess.run(["zsh", "-n"], input=zsh.stdout, capture_output=True)
        assert p.returncode == 0, p.stderr
    assert msb("completion", "fish").returncode == 2


def test_bash_completion_completes(msb, tmp_path):
    script = put(tmp_path / "msb.bash", msb("completion", "bash").stdout.decode())

    def complete(*words):
        line = " ".join(["msb", *words])
        cmd = (f"source {script}; COMP_WORDS=(msb {' '.join(words)}); "
               f"COMP_CWORD={len(words)}; COMP_LINE='{line}'; _msb; "
               "printf '%s\\n' \"${COMPREPLY[@]}\"")
        out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert set(complete("con")) == {"conformance", "config"}
    assert "--min-isolation" in complete("run", "--min")
    assert complete("run", "--min-isolation", "cont") == ["container"]
    assert set(complete("files", "")) == {"ls", "stat", "rm"}
    assert complete("completion", "z") == ["zsh"]
    assert complete("exec", "--", "--th") == []  # after --: the command's words


def test_man_page_is_generated_from_the_tables(msb):
    p = msb("man")
    assert p.returncode == 0
    roff = p.stdout.decode()
    assert roff.startswith(".TH MSB 1")
    for v in verbs_of(msb):
        assert f'.SS "msb {v}"' in roff, v
    assert "\\-\\-max\\-bytes\\-per\\-file" in roff
    assert ".SH CONFIGURATION" in roff and "MSB_CONFIG" in roff
    # The build installs the same page.
    built = os.path.join(os.environ.get("MSB_BUILD", os.path.join(ROOT, "build")), "cli",
                         "msb.1")
    with open(built) as f:
        assert f.read() == roff
    if shutil.which("man"):
        r = subprocess.run(["man", "-l", "-"], input=p.stdout, capture_output=True,
                           env=dict(os.environ, MANPAGER="cat", MANWIDTH="100"))
        assert r.returncode == 0, r.stderr
        text = r.stdout.decode()
        assert "msb cp" in text and "--replace" in text.replace("\u2010", "-")
    if shutil.which("groff"):
        r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z"], input=p.stdout,
                           capture_output=True)
        assert r.returncode == 0 and not r.stderr, r.stderr


def test_help_stops_at_the_double_dash(msb, tmp_path, write_json):
    # `--help` after `--` is the command's argument, not ours.
    cfg = write_json("fake.json", {"type": "fake", "posix_guest": True})
    p = msb("exec", "--config", cfg, "--min-isolation", "none", "--thread", "t", "--",
            "printf", "--help")
    assert p.returncode == 0 and p.stdout == b"--help", (p.stdout, p.stderr)
    assert msb("exec", "--help").stdout.startswith(b"usage: msb exec")


# ---- msb cp and msb files ------------------------------------------------------------------


def tree(path):
    out = {}
    for d, dirs, files in os.walk(path):
        rel = os.path.relpath(d, path)
        out[rel + "/"] = None
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                out[os.path.join(rel, f)] = fh.read()
    return out


@root_only
def test_cp_round_trips_files_and_directories_exactly(msb, state, tmp_path):
    key = ["--state-dir", state, *FLOOR, "--thread", "cp"]
    blob = bytes(range(256)) * 1000 + b"\x00end\xff"
    src = tmp_path / "src"
    (src / "sub" / "empty").mkdir(parents=True)
    (src / "sub" / "deeper").mkdir()
    (src / "a.bin").write_bytes(blob)
    (src / "sub" / "x.txt").write_bytes(b"x\n")
    (src / "sub" / "deeper" / "zero").write_bytes(b"")
    # A file in, out again: the same bytes.
    assert msb("cp", *key, str(src / "a.bin"), "sandbox:in.bin").returncode == 0
    p = msb("exec", *key, "--", "sha256sum", "in.bin")
    assert p.stdout.split()[0].decode() == __import__("hashlib").sha256(blob).hexdigest()
    p = msb("cp", *key, "sandbox:in.bin", str(tmp_path / "back.bin"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "back.bin").read_bytes() == blob
    assert oct((tmp_path / "back.bin").stat().st_mode & 0o777) == "0o644"
    # A directory into an existing guest directory lands under its name...
    assert msb("exec", *key, "--", "mkdir", "-p", "dst").returncode == 0
    p = msb("cp", *key, str(src), "sandbox:dst")
    assert p.returncode == 0, p.stderr
    p = msb("files", *key, "ls", "dst/src", "--json")
    assert p.returncode == 0, p.stderr
    assert {e["path"]: e["kind"] for e in json.loads(p.stdout)} == {
        "dst/src/a.bin": "file", "dst/src/sub": "directory"}
    # ...and back out into a new host path: the same tree, empty dirs included.
    p = msb("cp", *key, "sandbox:dst/src", str(tmp_path / "copy"))
    assert p.returncode == 0, p.stderr
    assert tree(tmp_path / "copy") == tree(src)
    # Exclusive on the host unless asked.
    p = msb("cp", *key, "sandbox:in.bin", str(tmp_path / "back.bin"))
    assert p.returncode == 8 and b"SandboxLandingExists" in p.stderr, p.stderr
    (tmp_path / "back.bin").write_bytes(b"old")
    p = msb("cp", *key, "--replace", "sandbox:in.bin", str(tmp_path / "back.bin"))
    assert p.returncode == 0 and (tmp_path / "back.bin").read_bytes() == blob
    # files stat / rm.
    p = msb("files", *key, "stat", "--json", "sandbox:in.bin")
    assert json.loads(p.stdout) == {"path": "in.bin", "kind": "file", "size_bytes": len(blob)}
    assert msb("files", *key, "rm", "in.bin").returncode == 0
    p = msb("files", *key, "stat", "in.bin")
    assert p.returncode == 5 and b"FileNotFoundError" in p.stderr
    p = msb("files", *key, "rm", "dst")
    assert p.returncode != 0 and b"recursive" in p.stderr
    assert msb("files", *key, "rm", "--recursive", "dst").returncode == 0
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "cp").returncode == 0


@root_only
def test_cp_refusals_name_the_error_and_copy_nothing(msb, state, tmp_path):
    key = ["--state-dir", state, *FLOOR, "--thread", "cpr"]
    p = msb("exec", *key, "--", "sh", "-c",
            "mkdir d; echo a > d/a; ln -s /etc/shadow d/l; ln -s /etc/passwd top;"
            "head -c 9000000 /dev/zero > big; mkdir many;"
            "for i in $(seq 70); do echo $i > many/$i; done")
    assert p.returncode == 0, p.stderr
    # A link in the guest: refused, in a directory too, and nothing lands.
    p = msb("cp", *key, "sandbox:top", str(tmp_path / "top"))
    assert p.returncode == 5 and b"OSError" in p.stderr and b"is a link" in p.stderr, p.stderr
    p = msb("cp", *key, "sandbox:d", str(tmp_path / "d"))
    assert p.returncode == 5 and b"`d/l` is a link" in p.stderr, p.stderr
    assert not (tmp_path / "d").exists() and not (tmp_path / "top").exists()
    # A path outside the storage base, either way.
    for guest in ("sandbox:../etc/passwd", "sandbox:/etc/passwd"):
        p = msb("cp", *key, guest, str(tmp_path / "out"))
        assert p.returncode == 2 and b"ValueError" in p.stderr, p.stderr
        assert b"outside the working directory" in p.stderr
    (tmp_path / "f").write_bytes(b"f")
    p = msb("cp", *key, str(tmp_path / "f"), "sandbox:../../escape")
    assert p.returncode == 2 and b"ValueError" in p.stderr, p.stderr
    # Over the caps: per file, and the number of files; raised within the
    # backend's ceilings, refused (never clamped) above them.
    p = msb("cp", *key, "sandbox:big", str(tmp_path / "big"))
    assert p.returncode == 8 and b"SandboxTransferCapExceeded" in p.stderr, p.stderr
    assert b"max_bytes_per_file" in p.stderr and not (tmp_path / "big").exists()
    p = msb("cp", *key, "sandbox:many", str(tmp_path / "many"))
    assert b"SandboxTransferCapExceeded" in p.stderr and b"max_files" in p.stderr, p.stderr
    assert not (tmp_path / "many").exists()
    p = msb("cp", *key, "--max-bytes-per-file", "16M", "sandbox:big", str(tmp_path / "big"))
    assert p.returncode == 0 and (tmp_path / "big").stat().st_size == 9000000, p.stderr
    p = msb("cp", *key, "--max-bytes-per-file", "2G", "sandbox:big", str(tmp_path / "b2"))
    assert p.returncode == 3 and b"SandboxTransferLimitsNotPermitted" in p.stderr, p.stderr
    big = tmp_path / "hostbig"
    big.write_bytes(b"\0" * (9 << 20))
    p = msb("cp", *key, str(big), "sandbox:hostbig")
    assert b"SandboxTransferCapExceeded" in p.stderr and b"files_in" in p.stderr, p.stderr
    # The host side is never followed through a link, source or destination.
    os.symlink("/etc/hostname", tmp_path / "hl")
    p = msb("cp", *key, str(tmp_path / "hl"), "sandbox:hl")
    assert p.returncode == 5 and b"is a link: not followed" in p.stderr, p.stderr
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "ok").write_bytes(b"ok")
    os.symlink("/etc/shadow", tmp_path / "tree" / "ln")
    p = msb("cp", *key, str(tmp_path / "tree"), "sandbox:tree")
    assert p.returncode == 5 and b"is a link" in p.stderr, p.stderr
    assert msb("files", *key, "stat", "tree").returncode == 5  # nothing was written
    os.symlink(tmp_path / "elsewhere", tmp_path / "dst-link")
    p = msb("cp", *key, "sandbox:d/a", str(tmp_path / "dst-link"))
    assert p.returncode != 0 and not (tmp_path / "elsewhere").exists(), p.stderr
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "cpr").returncode == 0


# ---- msb ls ------------------------------------------------------------------------------


@root_only
def test_ls_shows_backend_image_age_and_state(msb, state):
    assert msb("acquire", "--state-dir", state, *FLOOR, "--thread", "lsj").returncode == 0
    p, rows = msb.json("ls", "--state-dir", state, "--json")
    assert p.returncode == 0, p.stderr
    (row,) = rows
    assert row["backend"] == "ns" and row["image"] == "host" and row["state"] == "running"
    assert row["thread_id"] == "lsj" and 0 <= row["age_s"] < 120
    assert row["created_ns"] > 0
    text = msb("ls", "--state-dir", state).stdout.decode()
    assert text.splitlines()[0].split()[:5] == ["NAME", "STATE", "BACKEND", "IMAGE", "AGE"]
    assert " running " in text and " host " in text
    assert msb("purge", "--state-dir", state, "--scope", "cli", "--thread", "lsj").returncode == 0


# ---- progress on a terminal ----------------------------------------------------------------


def run_with_stderr_on_pty(cmd, env, timeout=120):
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                         env=env)
    os.close(slave)
    err = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            err += chunk
        elif p.poll() is not None:
            break
    out = p.stdout.read()
    p.wait(timeout=10)
    os.close(master)
    return p.returncode, out, err


@root_only
@pytest.mark.skipif(not os.path.exists("/bin/busybox"), reason="make-oci-image needs busybox-static")
def test_image_unpack_progress_on_a_terminal_only(msb, state, tmp_path):
    img = tmp_path / "img"
    subprocess.run([os.path.join(ROOT, "scripts", "make-oci-image"), str(img)], check=True,
                   capture_output=True)
    env = dict(os.environ, MSB_CONFIG="")
    cmd = [msb.path, "run", "--state-dir", state, *FLOOR, "--image", f"oci:{img}", "--",
           "/bin/sh", "-c", "echo in-image"]
    # A pipe: the same first unpack says nothing.
    p = msb(*cmd[1:], env=env, timeout=120)
    assert p.returncode == 0 and p.stdout == b"in-image\n", p.stderr
    assert p.stderr == b"", p.stderr
    # A terminal, on a fresh cache: the progress line, bytes and layers.
    shutil.rmtree(os.path.join(state, "images"))
    rc, out, err = run_with_stderr_on_pty(cmd, env)
    assert rc == 0 and out == b"in-image\n", err
    text = err.decode(errors="replace")
    assert f"msb: unpacking oci:{img}: layer 1/2" in text, text
    assert "MiB" in text and "\r" in text
    assert f"msb: unpacked oci:{img}: 2 layers" in text, text
    # The layers are cached now: the second time there is nothing to wait for.
    rc, out, err = run_with_stderr_on_pty(cmd, env)
    assert rc == 0 and b"unpack" not in err, err


def test_the_cli_starts_without_libarchive_or_libcurl(msb):
    """`msb` loads libarchive (OCI layers) and libcurl (the docker backend)
    only when a verb needs them (src/backends/lazy_lib.h; issue 17), and
    links libmsb's archive (and jansson's and utf8proc's): what the dynamic
    loader maps at start is libc and libm - not libmsb.so, whose symbols it
    would bind, nor the 40 libraries libarchive and libcurl pull (libxml2,
    ICU, TLS, ...)."""
    p = msb("version", env=dict(os.environ, MSB_CONFIG="", LD_TRACE_LOADED_OBJECTS="1"))
    assert p.returncode == 0, p.stderr
    loaded = [line.split()[0] for line in p.stdout.decode().splitlines() if line.strip()]
    assert not any(n.startswith("libmsb.so") for n in loaded), loaded
    heavy = [n for n in loaded if n.startswith(("libarchive", "libcurl", "libxml2", "libicu",
                                                 "libssl", "libgnutls", "libkrb5"))]
    assert heavy == [], loaded
    assert len(loaded) <= 6, loaded  # vdso, libc, libm, the loader; jansson, utf8proc at most
    assert msb("version").returncode == 0
