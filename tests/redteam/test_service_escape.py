"""Red team, the reward service: a candidate evaluated by `aka serve` looks for the service's
queue (other candidates' files waiting for a slot, every result) and its port; with evaluations
started ahead (``--prestart``), also for the baseline's stage beside its own and a way to change
its own staged files after the judge copied (and checked) them.

The service's state folder is put where runners may otherwise read (under /opt, one of the
system folders a runner reads): the judge must carve it out. The candidate computes GELU
correctly only when it found nothing; any file of the queue it could read, or a connection to the
service it could open, turns its output into zeros (a correctness failure)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from aka_core.evaluation import sandbox

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TASK = "open/gelu"  # the corpus's gelu without its rules: the static policy would stop the probe


def open_tasks_root() -> Path:
    import importlib.util

    spec = importlib.util.spec_from_file_location("aka_redteam_harness_service",
                                                  Path(__file__).with_name("harness.py"))
    harness = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = harness
    spec.loader.exec_module(harness)
    return harness.task_folder(TASK).parents[1]

PROBE = '''
import os, pathlib, socket, sys
import torch
import triton
import triton.language as tl

_found = []
_state = pathlib.Path({state!r})
try:
    for path in _state.rglob("*"):
        if path.is_file():
            try:
                path.read_bytes()[:1]
                _found.append(str(path))
            except OSError:
                pass
except OSError:
    pass
try:  # the service's access token (with it, any client could ask for held-out verdicts)
    pathlib.Path({token_file!r}).read_bytes()
    _found.append("token")
except OSError:
    pass
try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=2):
        _found.append("port")
except OSError:
    pass
for _other in pathlib.Path("..").glob("stage/baseline/**/*"):  # the baseline's staged files
    try:
        _other.read_bytes()[:1]
        _found.append(str(_other))
    except OSError:
        pass
try:
    pathlib.Path("../stage/candidate/kernel.py").write_text("rewritten after the check")
    _found.append("own stage writable")
except OSError:
    pass
print("probe found:", _found, file=sys.stderr)
'''


@pytest.mark.parametrize("prestart", ["--prestart", "--no-prestart"])
def test_a_candidate_cannot_read_the_queue_or_reach_the_service(tmp_path: Path,
                                                                prestart: str) -> None:
    if sandbox.landlock_abi() <= 0:
        pytest.skip("no Landlock here: runners cannot be confined")
    try:
        # One at a time (the parametrized cases may run in parallel workers): a runner's sandbox
        # lists the folders beside a protected one, so another case's state folder appearing in
        # /opt meanwhile would make the pre-started runners' sandbox differ from the request's.
        lock = open("/opt/aka-redteam-serve.lock", "a")  # noqa: SIM115 (held to the test's end)
        state = Path("/opt") / f"aka-redteam-serve-{uuid.uuid4().hex[:8]}"
    except OSError:
        pytest.skip("/opt is not writable here")
    fcntl.flock(lock, fcntl.LOCK_EX)
    state.mkdir()
    port_file = state / "service.json"
    proc = subprocess.Popen([sys.executable, "-m", "aka_core.cli", "serve", "--tasks",
                             str(open_tasks_root()), "--state", str(state), "--port", "0",
                             "--device", "cpu", prestart], stdout=subprocess.DEVNULL,
                            env={k: v for k, v in os.environ.items()
                                 if k != "AKA_SERVICE_TOKEN"},  # it makes one in $HOME
                            stderr=open(tmp_path / "serve.log", "wb"))  # noqa: SIM115
    try:
        deadline = time.monotonic() + 60
        while not port_file.is_file():
            assert proc.poll() is None and time.monotonic() < deadline, (
                (tmp_path / "serve.log").read_text()[-2000:])
            time.sleep(0.2)
        url = json.loads(port_file.read_text())["url"]
        port = int(url.rsplit(":", 1)[1])
        from aka_core.api import ServiceClient

        honest = (ROOT / "tests" / "solutions" / "triton2triton" / "gelu" / "kernel.py").read_text()
        from aka_core.service import access_token

        token_file = access_token.token_file(port)
        assert token_file.is_file()  # the service made one: the probe has it to look for
        probe = PROBE.format(state=str(state), port=port, token_file=str(token_file))
        exploit = honest.replace("import torch\n", probe, 1) + (
            "\n_honest = gelu\n\ndef gelu(x):\n"
            "    return torch.zeros_like(x) if _found else _honest(x)\n")
        with ServiceClient(url) as client:
            # Another candidate waits in the queue while the probe runs.
            client.submit(TASK, {"kernel.py": honest}, id="victim")
            result = client.evaluate(TASK, {"kernel.py": exploit}, id="prober", priority=5)
        assert result["status"] == "scored", result
        assert result["record"]["evaluation"]["confinement"]["confined"] is True
        if prestart == "--prestart":  # the pre-started runners were the ones probed
            assert result["record"]["evaluation"]["warm"] == {"used": True}
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(state, ignore_errors=True)
        lock.close()  # lets the other case go


def test_a_workspace_link_cannot_carry_files_from_outside_into_the_candidate(tmp_path: Path
                                                                           ) -> None:
    """An agent links a file it cannot read from its sandbox (a held-out draw, another rollout's
    files) into its workspace; the client that sends the workspace runs unconfined, and would
    have read the link's target into the candidate's own files. Links are refused, by name."""
    import os

    from aka_core.api import files_of

    secret = tmp_path / "outside" / "held_out.json"
    secret.parent.mkdir()
    secret.write_text('{"M": 7001}')
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "kernel.py").write_text("def gelu(x):\n    return x\n")
    os.symlink(secret, workspace / "notes.txt")
    with pytest.raises(ValueError, match=r"notes\.txt: a symbolic link"):
        files_of(workspace)
    (workspace / "notes.txt").unlink()
    os.symlink(secret.parent, workspace / "data")  # a linked folder: not walked, refused too
    with pytest.raises(ValueError, match="data: a symbolic link"):
        files_of(workspace)
    (workspace / "data").unlink()
    assert files_of(workspace) == {"kernel.py": b"def gelu(x):\n    return x\n"}
    os.symlink(secret, workspace / "notes.txt")
    refused = subprocess.run([sys.executable, "-m", "aka_core.cli", "eval",
                              str(ROOT / "tasks" / "triton2triton" / "gelu"), "--candidate",
                              str(workspace), "--service", "http://127.0.0.1:9"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0 and "notes.txt: a symbolic link" in refused.stderr
