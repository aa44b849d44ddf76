"""Shared fixtures: the real binaries from the build directory."""
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("MSB_BUILD", os.path.join(ROOT, "build"))


class Msb:
    def __init__(self, path):
        self.path = path

    def __call__(self, *args, input=None, timeout=60, env=None):
        # No configuration file unless the test gives one: the host's own
        # ~/.config/msb or /etc/msb must not decide a test (docs/cli.md).
        if env is None:
            env = dict(os.environ, MSB_CONFIG="")
        # `run` and `exec` attach a stdin that is not a terminal: give them
        # an empty one unless the test has input, whatever the runner holds.
        stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        return subprocess.run([self.path, *args], capture_output=True, timeout=timeout,
                              env=env, **stdin)

    def json(self, *args, **kw):
        p = self(*args, **kw)
        return p, json.loads(p.stdout.decode()) if p.stdout.strip() else None


@pytest.fixture(scope="session")
def msb():
    path = os.path.join(BUILD, "cli", "msb")
    assert os.access(path, os.X_OK), f"build msb first: {path}"
    return Msb(path)


@pytest.fixture
def write_json(tmp_path):
    def write(name, obj):
        p = tmp_path / name
        p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
        return str(p)
    return write


@pytest.fixture(scope="session")
def examples():
    return os.path.join(ROOT, "examples")
