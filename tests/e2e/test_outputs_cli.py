"""Declared outputs through `msb run --output PATH[:TYPE] --sink DIR` (issue 7).

A program in a call-scoped `ns` sandbox writes a PNG and a CSV; both land under
the sink with the bytes and SHA-256 the guest computed. Refusals keep their
seed names and the outputs exit status (8). Each test has its own state root
and sink; the leak checker compares the host before and after.
"""
import hashlib
import os
import shutil
import tempfile

import pytest

from leaks import checked_state_root

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the ns e2e suite runs as root")

FLOOR = ["--min-isolation", "container"]

PROGRAM = r"""
import hashlib, struct, zlib
def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
w = h = 8
raw = b''.join(b'\x00' + b''.join(bytes((x * 30, y * 30, 200)) for x in range(w)) for y in range(h))
png = (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
       + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
open('chart.png', 'wb').write(png)
open('table.csv', 'w').write('n,square\n' + ''.join('%d,%d\n' % (i, i * i) for i in range(10)))
for n in ('chart.png', 'table.csv'):
    print(n, hashlib.sha256(open(n, 'rb').read()).hexdigest())
"""


@pytest.fixture
def state():
    yield from checked_state_root("/tmp/msb-e2e-out-")


@pytest.fixture
def sink():
    d = tempfile.mkdtemp(prefix="/tmp/msb-e2e-sink-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_image_and_csv_land_with_guest_hashes(msb, state, sink):
    p = msb("run", "--state-dir", state, *FLOOR, "--output", "chart.png:image/png",
            "--output", "table.csv:text/csv", "--sink", sink, "--", "python3", "-c", PROGRAM)
    assert p.returncode == 0, p.stderr
    guest = dict(line.split() for line in p.stdout.decode().splitlines())
    for name in ("chart.png", "table.csv"):
        data = open(os.path.join(sink, name), "rb").read()
        assert hashlib.sha256(data).hexdigest() == guest[name]
        assert f"msb: landed {name} ({len(data)} bytes) sha256:{guest[name]}".encode() in p.stderr
    assert open(os.path.join(sink, "chart.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert open(os.path.join(sink, "table.csv")).read().startswith("n,square\n0,0\n")


def test_outputs_without_a_sink_are_refused_before_running(msb, state, sink):
    marker = os.path.join(sink, "ran")
    p = msb("run", "--state-dir", state, *FLOOR, "--output", "x.txt", "--", "touch", marker)
    assert p.returncode == 8
    assert b"SandboxOutputSinkRequired" in p.stderr
    assert not os.path.exists(marker)


def test_missing_output_and_existing_destination(msb, state, sink):
    p = msb("run", "--state-dir", state, *FLOOR, "--output", "nope.txt", "--sink", sink,
            "--", "true")
    assert p.returncode == 8
    assert b"SandboxOutputMissing" in p.stderr and b"nope.txt" in p.stderr
    open(os.path.join(sink, "a.txt"), "w").write("old")
    p = msb("run", "--state-dir", state, *FLOOR, "--output", "a.txt", "--sink", sink,
            "--", "sh", "-c", "echo new > a.txt")
    assert p.returncode == 8
    assert b"SandboxLandingExists" in p.stderr
    assert open(os.path.join(sink, "a.txt")).read() == "old"
    p = msb("run", "--state-dir", state, *FLOOR, "--output", "a.txt", "--sink", sink,
            "--replace", "--", "sh", "-c", "echo new > a.txt")
    assert p.returncode == 0, p.stderr
    assert open(os.path.join(sink, "a.txt")).read() == "new\n"


def test_output_options_belong_to_run(msb, state):
    p = msb("exec", "--state-dir", state, *FLOOR, "--thread", "t", "--output", "x", "--",
            "true")
    assert p.returncode == 2
    assert b"options of `msb run` only" in p.stderr
