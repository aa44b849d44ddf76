#!/usr/bin/env python3
"""An agent host's tool loop over msb, with a scripted stand-in for the model.

The host attaches one sandboxed tool (a Session), and for every tool call the
model makes it begins a Call keyed to the conversation, acquires the
conversation's sandbox through the router (so the policy applies to every
call), runs the command, and ends the call with the text the model will read.
A refusal is a sentence for the model, never a crash of the host.

    PYTHONPATH=bindings/python MSB_BUILD=build \\
        python3 bindings/python/examples/agent_loop.py --state-dir /tmp/msb-demo

Replace `ScriptedModel` with a call to your language model.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import msb  # noqa: E402


class ScriptedModel:
    """Answers each observation with the next tool request, then a final answer."""

    def __init__(self):
        self.plan = [
            {"tool": "shell", "command": "printf 'print(6 * 7)\\n' > answer.py"},
            {"tool": "shell", "command": "python3 answer.py || echo 42"},
            {"tool": "shell", "command": "ls"},
            {"tool": "collect"},  # hand the declared outputs to the host
        ]

    def next(self, observation):
        if observation is not None:
            print(f"  observation: {observation.strip()!r}")
        return self.plan.pop(0) if self.plan else {"answer": "the answer is 42"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state-dir", help="the ns backend's state root")
    ap.add_argument("--fake", action="store_true",
                    help="use the in-process fake backend (no sandbox is started)")
    ap.add_argument("--thread", default="conversation-1", help="the conversation id")
    ap.add_argument("--outputs", help="where collected outputs land (default: a new temp dir)")
    args = ap.parse_args()

    if args.fake:
        config = {"min_isolation": "none", "backends": [{"type": "fake", "declarations": {
            "capabilities": ["exec", "files_in", "files_out", "files_list", "reclaim"],
            "egress_modes": ["closed"]}}]}
    else:
        backend = {"type": "ns"}
        if args.state_dir:
            backend["state_dir"] = args.state_dir
        # min_cleanup "reclaim": a call removes only its own call directory,
        # so the conversation's files outlive the call (docs/lifecycle.md).
        config = {"min_isolation": "container", "min_cleanup": "reclaim",
                  "backends": [backend]}
    # answer.py is a declared output: `collect` lands it in the host's directory.
    spec = {"kind": "shell", "requires": ["exec", "files_in", "files_out"],
            "declared_outputs": [{"path": "answer.py", "media_type": "text/x-python"}]}
    outputs = args.outputs or tempfile.mkdtemp(prefix="msb-outputs-")

    with msb.Client() as client:
        router = client.router(config)
        router.ensure_can_serve(spec)  # the wiring test: refuses loudly at start-up
        # A conversation-scoped tool whose calls keep the sandbox between them.
        tool = router.session(spec, name="shell", description="run a shell command",
                              sink=outputs, existing="replace")
        model, observation = ScriptedModel(), None
        try:
            while True:
                step = model.next(observation)
                if "answer" in step:
                    print(f"model: {step['answer']}")
                    break
                print(f"model asks: {step.get('command', step['tool'])}")
                with tool.begin_call(scope="demo", thread_id=args.thread) as call:
                    sandbox = call.acquire()
                    if isinstance(sandbox, str):  # unavailable: tell the model why
                        call.refuse(sandbox)
                    else:
                        try:
                            if step["tool"] == "collect":
                                landed = sandbox.collect_outputs(spec)  # the tool's sink
                                # The model sees each display, never the host path.
                                call.result("landed: " + ", ".join(a["display"]
                                                                   for a in landed))
                            else:
                                r = sandbox.exec(shell=step["command"], timeout=30)
                                call.result(r.text + r.stderr.decode(errors="replace"))
                        except (msb.TimeoutError, msb.SandboxOutputError) as e:
                            call.refuse(f"Error: {e.message}")
                observation = "\n".join(item["text"] for item in call.items)
        finally:
            # The conversation is over: dispose its sandboxes.
            disposed, undisposed = router.dispose_scope("demo", args.thread)
            print(f"disposed {disposed} sandbox(es), {undisposed} left")
            print(f"outputs are in {outputs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
