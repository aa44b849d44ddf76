# SPDX-License-Identifier: Apache-2.0
"""Guest client of msb's native host-tool channel (docs/hosttools.md).

    import msb_host_tools as h
    print(h.call("add", left=2, right=3))

The socket is $MSB_HOST_TOOLS_SOCKET, else /maf-sandbox/work/.msb-host-tools.sock.
Each call is one frame each way: a 4-byte little-endian length, then JSON.
This module is not a control: every gate is on the host.
"""
import json
import os
import socket
import struct

SOCKET = os.environ.get("MSB_HOST_TOOLS_SOCKET") or "/maf-sandbox/work/.msb-host-tools.sock"


class HostToolError(Exception):
    """The host refused the call; str(error) is its sentence."""


_conn = None


def _connect():
    global _conn
    if _conn is None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(SOCKET)
        _conn = s
    return _conn


def _read(s, n):
    parts = []
    while n:
        chunk = s.recv(n)
        if not chunk:
            raise HostToolError("Error: the host closed the host-tool channel")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def call(name, **arguments):
    """Call host tool `name`; returns its value or raises HostToolError."""
    global _conn
    body = json.dumps({"name": name, "arguments": arguments},
                      ensure_ascii=False, allow_nan=False).encode("utf-8")
    s = _connect()
    try:
        s.sendall(struct.pack("<I", len(body)) + body)
        (n,) = struct.unpack("<I", _read(s, 4))
        answer = json.loads(_read(s, n))
    except (OSError, HostToolError):
        _conn = None
        s.close()
        raise
    if "refusal" in answer:
        raise HostToolError(answer["refusal"])
    return answer["value"]
