"""msb from Python: a stdlib-only client of ``msb serve`` (docs/serve.md).

    import msb
    with msb.Client() as c:
        router = c.router({"min_isolation": "container", "backends": [{"type": "ns"}]})
        sb = router.acquire(msb.Key("app", "thread-1", "agent"), {"kind": "shell"})
        print(sb.exec(["echo", "hi"]).text)
        router.dispose(msb.Key("app", "thread-1", "agent"))

Errors are raised as the seed names them (msb.SandboxEgressNotEnforced, ...).
"""
from .client import (Call, Client, ExecResult, HostToolRegistry, Key, Router, Sandbox, Session,
                     find_msb)
from .errors import (ERRORS, InvalidParams, MethodNotFound, MsbError, RpcError, ServerGone,
                     error_from_response)
from . import errors as _errors

globals().update(_errors.ERRORS)

__all__ = ["Call", "Client", "ExecResult", "HostToolRegistry", "Key", "Router", "Sandbox", "Session", "find_msb",
           "ERRORS", "InvalidParams", "MethodNotFound", "MsbError", "RpcError", "ServerGone",
           "error_from_response", *_errors.ERRORS]
