"""`msb check`, the wiring test, against the real binary (checklist 5.x, 6.x)."""
import os


def test_version_and_help(msb):
    p = msb("version")
    assert p.returncode == 0 and p.stdout.startswith(b"msb ")
    p = msb("--help")
    assert p.returncode == 0 and b"check" in p.stdout
    p = msb("check", "--help")
    assert p.returncode == 0 and b"--spec" in p.stdout
    p = msb("no-such-verb")
    assert p.returncode == 2 and b"unknown verb" in p.stderr


def test_served_by_the_dev_router(msb, examples):
    p, out = msb.json("check", "--json", "--spec", os.path.join(examples, "spec-basic.json"),
                      "--router", os.path.join(examples, "router-dev.json"))
    assert p.returncode == 0, p.stderr
    assert out["served"] is True
    assert out["backend"] == "in-process"
    assert out["isolation"] == "none"
    assert out["isolation_scope"] == "conversation"


def test_default_router_refuses_below_microvm_5_1(msb, examples):
    # No --router: the production posture, floor microvm; the fake (none) is refused.
    p, out = msb.json("check", "--json", "--spec", os.path.join(examples, "spec-basic.json"))
    assert p.returncode == 3
    assert out["served"] is False
    assert out["error"] == "SandboxBackendNotPermitted"
    assert "minimum-isolation floor" in out["message"]


def test_egress_refusal_names_mode_6_10(msb, write_json, examples):
    spec = write_json("spec.json", {"kind": "bicep", "egress": "allowlist",
                                    "egress_allow": ["mcr.microsoft.com"]})
    p = msb("check", "--spec", spec, "--router", os.path.join(examples, "router-closed-only.json"))
    assert p.returncode == 3
    assert b"SandboxEgressNotEnforced" in p.stdout
    assert b"cannot enforce the 'allowlist' egress" in p.stdout


def test_method_rule_needs_egress_methods_6_7(msb, examples):
    # The example's GET-only rule derives EGRESS_METHODS (3.13), which the
    # capability check refuses before the egress check (6.2).
    p = msb("check", "--spec", os.path.join(examples, "spec-allowlist.json"),
            "--router", os.path.join(examples, "router-closed-only.json"))
    assert p.returncode == 3
    assert b"SandboxCapabilityNotSupported" in p.stdout
    assert b"egress_methods" in p.stdout


def test_process_is_never_a_rung_1_4(msb, write_json, examples):
    router = write_json("router.json", {"min_isolation": "process", "backends": [{"type": "fake"}]})
    p, out = msb.json("check", "--json", "--spec", os.path.join(examples, "spec-basic.json"),
                      "--router", router)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert out["error"] == "ValueError"
    assert "not a rung" in out["message"]

    router = write_json("router2.json", {"min_isolation": "none",
                                         "backends": [{"type": "declared", "name": "old",
                                                       "isolation": "process"}]})
    p, out = msb.json("check", "--json", "--spec", os.path.join(examples, "spec-basic.json"),
                      "--router", router)
    assert p.returncode == 3
    assert out["error"] == "SandboxBackendNotPermitted"


def test_unknown_spec_key_is_refused_naming_it(msb, write_json, examples):
    spec = write_json("spec.json", {"kind": "k", "egress": "closed", "netwrk": True})
    p = msb("check", "--spec", spec, "--router", os.path.join(examples, "router-dev.json"))
    assert p.returncode == 2
    assert b"netwrk" in p.stderr


def test_legacy_backend_attribute_refused_4_10(msb, write_json, examples):
    router = write_json("router.json", {"min_isolation": "none", "backends": [
        {"type": "declared", "name": "legacy", "isolation": "container",
         "egress_modes": ["closed"]}]})
    p = msb("check", "--spec", os.path.join(examples, "spec-basic.json"), "--router", router)
    assert p.returncode != 0
    assert b"egress_modes" in (p.stdout + p.stderr)


def test_bad_json_and_missing_file(msb, write_json, examples):
    spec = write_json("bad.json", "{not json")
    p = msb("check", "--spec", spec)
    assert p.returncode == 2 and b"invalid JSON" in p.stderr
    p = msb("check", "--spec", "/nonexistent/spec.json")
    assert p.returncode == 5 and b"cannot open" in p.stderr
    p = msb("check")
    assert p.returncode == 2 and b"--spec is required" in p.stderr


TWO = [{"type": "declared", "name": "docker", "isolation": "container",
        "declarations": {"egress_modes": ["closed"]}},
       {"type": "declared", "name": "firecracker", "isolation": "microvm",
        "declarations": {"egress_modes": ["allowlist", "closed"]}}]


def test_check_says_which_backend_fixed_picked_and_why_others_were_passed_over(msb, write_json):
    # Issue 16: the pick and its reason, and a line for every backend passed over.
    router = write_json("router.json", {"min_isolation": "container", "backends": TWO})
    spec = write_json("spec.json", {"kind": "k"})
    p = msb("check", "--spec", spec, "--router", router)
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert "why: fixed selection picked 'docker' (the first registered backend)" in out, out
    assert "docker           serves: passes every check" in out, out
    assert ("firecracker      passed over: not tried: fixed selection asks only 'docker'"
            in out), out
    # Refused by the pick: FIXED never tries firecracker, which would serve.
    spec = write_json("spec2.json", {"kind": "k", "egress": "allowlist", "egress_allow": ["h"]})
    p, out = msb.json("check", "--json", "--spec", spec, "--router", router)
    assert p.returncode == 3 and out["error"] == "SandboxEgressNotEnforced"
    route = out["route"]
    assert route["selection"] == "fixed" and route["backend"] is None
    assert [s["tried"] for s in route["steps"]] == [True, False]
    assert "no other backend is tried" in route["summary"]
    # `selected` is the named reason.
    router = write_json("router2.json", {"selected": "firecracker", "backends": TWO})
    p, out = msb.json("check", "--json", "--spec", spec, "--router", router)
    assert p.returncode == 0, p.stdout
    assert out["route"]["summary"].startswith(
        "fixed selection picked 'firecracker' (named by `selected`)")


def test_policy_wording_in_the_seed_s_phrases(msb, write_json):
    # Issue 16: a malformed floor string, a spec above the backend's rung, a
    # backend that states no guest shape - each in the seed's words too.
    spec = write_json("spec.json", {"kind": "k"})
    router = write_json("r1.json", {"min_isolation": "hypervisor", "backends": TWO})
    p, out = msb.json("check", "--json", "--spec", spec, "--router", router)
    assert p.returncode == 2 and "not a valid Isolation" in out["message"], out
    router = write_json("r2.json", {"min_isolation": "container", "backends": TWO})
    spec = write_json("s2.json", {"kind": "k", "min_isolation": "vm"})
    p, out = msb.json("check", "--json", "--spec", spec, "--router", router)
    assert p.returncode == 3 and "the workload requires at least 'vm'" in out["message"], out
    spec = write_json("s3.json", {"kind": "k", "requires_os_family": "posix"})
    p, out = msb.json("check", "--json", "--spec", spec, "--router", router)
    assert p.returncode == 3 and out["error"] == "SandboxOsFamilyNotSupported"
    assert "offers no guest whose shape it states" in out["message"], out
    # An explicit null in declarations is refused like malformed limits (4.12).
    router = write_json("r3.json", {"min_isolation": "container", "backends": [
        {"type": "declared", "name": "d", "isolation": "container",
         "declarations": {"egress_modes": ["closed"], "limits": None}}]})
    p, out = msb.json("check", "--json", "--spec", write_json("s4.json", {"kind": "k"}),
                      "--router", router)
    assert p.returncode == 3 and out["error"] == "SandboxTransferLimitsNotPermitted", out
