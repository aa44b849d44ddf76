"""Exceptions named as the seed names them, one class per msb error name.

The table mirrors ``include/msb/error.h`` (each ``MSB_E_*`` code's comment is its
name) and the families ``src/util/error.c`` puts each code in; the test suite
checks the names against the header. Each class derives from :class:`MsbError`
and from the Python built-in family the seed raises it as, so
``except PermissionError`` catches every safety refusal and ``except
TimeoutError`` catches ``SandboxProgramTimeout``.
"""
import builtins


class MsbError(Exception):
    """A typed error from msb: ``name``, ``message``, ``code``, ``categories``
    and the typed ``payload`` (a dict: cap and file, path, file_refusal, or
    signal and output)."""

    name = "MsbError"

    def __init__(self, message, code=None, categories=(), payload=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.categories = tuple(categories)
        self.payload = payload or {}

    def __str__(self):
        return f"{self.name}: {self.message}"


class RpcError(MsbError):
    """A JSON-RPC protocol error (malformed request, unknown method, bad params)."""

    name = "RpcError"


class InvalidParams(RpcError, builtins.ValueError):
    name = "InvalidParams"


class MethodNotFound(RpcError):
    name = "MethodNotFound"


class ServerGone(MsbError, builtins.ConnectionError):
    """The msb serve process exited or closed its output."""

    name = "ServerGone"


# name -> families (src/util/error.c): P permission, R runtime, L lookup,
# V value, T type, O os, TM timeout, OUT output, NI not implemented,
# A assertion, C cancelled.
ERROR_FAMILIES = {
    "ValueError": "V",
    "TypeError": "T",
    "RuntimeError": "R",
    "NotImplementedError": "R NI",
    "OSError": "O",
    "FileNotFoundError": "O",
    "IsADirectoryError": "O",
    "NotADirectoryError": "O",
    "PermissionError": "O P",
    "TimeoutError": "TM O",
    "CancelledError": "C",
    "LookupError": "L",
    "MemoryError": "R",
    "ProtocolError": "R",
    "SandboxGone": "R",
    "NoSandboxBackend": "L",
    "SandboxBackendNotPermitted": "P",
    "SandboxCapabilityDenied": "P",
    "SandboxIdentityDenied": "P",
    "SandboxCapabilityNotSupported": "R",
    "SandboxOsFamilyNotSupported": "R",
    "SandboxTransferLimitsNotPermitted": "P",
    "SandboxEgressNotEnforced": "P",
    "SandboxScopeNotEnforced": "P",
    "SandboxUnclean": "P",
    "SandboxTransferCapExceeded": "OUT P",
    "SandboxOutputError": "OUT",
    "SandboxOutputMissing": "OUT",
    "SandboxOutputSizeUnknown": "OUT",
    "SandboxOutputUnreachable": "OUT",
    "SandboxOutputNotRegular": "OUT",
    "SandboxOutputNotConfined": "OUT",
    "SandboxOutputSinkRequired": "OUT V",
    "SandboxArtifactNameInvalid": "OUT V",
    "SandboxArtifactNameCollision": "OUT V",
    "SandboxLandingExists": "OUT",
    "SandboxLandingNotConfined": "OUT",
    "SandboxLandingNotText": "OUT",
    "SandboxFileRefused": "O",
    "SandboxShellTransferUnfinished": "R",
    "SandboxProgramTimeout": "TM O",
    "SandboxQueuedTimeout": "TM O",
    "ConformanceFailure": "A",
    "HostToolNotDeclared": "V",
    "HostToolIdentityNotAllowed": "V",
}

_FAMILY_BASE = {
    "P": builtins.PermissionError,
    "R": builtins.RuntimeError,
    "L": builtins.LookupError,
    "V": builtins.ValueError,
    "T": builtins.TypeError,
    "O": builtins.OSError,
    "TM": builtins.TimeoutError,
    "NI": builtins.NotImplementedError,
    "A": builtins.AssertionError,
}

# The seed's own built-in classes keep their built-in as the family.
_OWN_BUILTIN = {
    "FileNotFoundError", "IsADirectoryError", "NotADirectoryError", "PermissionError",
    "TimeoutError", "LookupError", "MemoryError", "NotImplementedError", "RuntimeError",
    "ValueError", "TypeError", "OSError",
}

ERRORS = {}


def _bases(name, families):
    bases = []
    if name in _OWN_BUILTIN:
        bases.append(getattr(builtins, name))
    if "OUT" in families and name != "SandboxOutputError":
        bases.append(ERRORS["SandboxOutputError"])
    for f in families:
        if f in _FAMILY_BASE:
            bases.append(_FAMILY_BASE[f])
    # Drop a base that another base already derives from (a consistent MRO).
    kept = [b for b in bases if not any(o is not b and issubclass(o, b) for o in bases)]
    unique = []
    for b in kept:
        if b not in unique:
            unique.append(b)
    return (MsbError, *unique) if not any(issubclass(b, MsbError) for b in unique) \
        else tuple(unique)


for _name in ["SandboxOutputError"] + [n for n in ERROR_FAMILIES if n != "SandboxOutputError"]:
    _cls = type(_name, _bases(_name, ERROR_FAMILIES[_name].split()), {"name": _name})
    _cls.__module__ = __name__
    ERRORS[_name] = _cls
    globals()[_name] = _cls
del _name, _cls


def error_from_response(error):
    """The exception for a JSON-RPC error object."""
    code = error.get("code")
    data = error.get("data") or {}
    message = error.get("message", "")
    if code == -32000 and data.get("name"):
        cls = ERRORS.get(data["name"], MsbError)
        return cls(data.get("message", message), data.get("code"), data.get("categories", ()),
                   data.get("payload"))
    if code == -32602:
        return InvalidParams(message, code)
    if code == -32601:
        return MethodNotFound(message, code)
    return RpcError(message, code)
