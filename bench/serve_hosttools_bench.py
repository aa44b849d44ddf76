#!/usr/bin/python3
"""Host-tool call round trips through `msb serve` and the Python client (issue 10).

A guest Python program on ns calls a host tool registered by the Python client
N times over the native channel and M times over exec; it times each call
inside the guest and prints the p50 and p99 in microseconds. Needs root (ns).

    MSB_BUILD=build /usr/bin/python3 bench/serve_hosttools_bench.py [--native N] [--exec M]
"""
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python"))
import msb  # noqa: E402

PROGRAM = """import {module} as t, time
ts = []
for i in range({n}):
    a = time.perf_counter()
    t.call("add", left=i, right=1)
    ts.append(time.perf_counter() - a)
ts.sort()
print(round(ts[len(ts) // 2] * 1e6), round(ts[int(len(ts) * 0.99)] * 1e6))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--native", type=int, default=1000)
    ap.add_argument("--exec", type=int, default=50, dest="exec_calls")
    args = ap.parse_args()
    state = tempfile.mkdtemp(prefix="/tmp/msb-bench-")
    try:
        with msb.Client(args=["--no-events"]) as c:
            r = c.router({"min_isolation": "container",
                          "backends": [{"type": "ns", "state_dir": state}]})
            key = msb.Key("bench", "t", "a")
            sb = r.acquire(key, {"kind": "shell"})
            n_max = max(args.native, args.exec_calls)
            reg = c.host_tools(max_calls_per_run=n_max, response_limits={"max_files": n_max})
            reg.register("add", lambda left, right: left + right,
                         declaration={"source": None, "sink": None, "identity": None},
                         parameters={"type": "object",
                                     "properties": {"left": {"type": "integer"},
                                                    "right": {"type": "integer"}}})
            for transport, module, n in [("native", "msb_host_tools", args.native),
                                         ("exec", "maf_host_tools", args.exec_calls)]:
                res = sb.run_with_host_tools(reg, PROGRAM.format(module=module, n=n),
                                             transport=transport, timeout=300,
                                             poll_interval=0.001)
                p50, p99 = res.text.split()
                print(f"{transport}: {n} calls, p50 {p50} us, p99 {p99} us")
            r.dispose(key)
    finally:
        shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
