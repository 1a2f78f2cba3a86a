"""The commands README.md shows a newcomer, run as written, from this checkout.

README's first screen gives two commands, `make up` and `make test` (this test runs inside the second);
"Try it on this machine" gives the commands to use the cluster `make up` made and to remove it. They
run here in that order, each as a shell command from the repository root, and must succeed; the
first job's output and the pods are checked. `make down` ends with the local Kubernetes stopped: in
`make test` this runs beside the T3 tests (after Molecule, in its lane); its teardown overlaps them, and
the stop of the local Kubernetes waits until they are done (they hold LOCALKUBE_USERS_LOCK, shared, while
they run; `localkube.py stop` takes it exclusively).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.support.proc import run  # noqa: E402


def fenced_block_after(heading):
    """The lines of the first ```bash block after `heading` in README.md, without comments."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(heading):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("  #")[0].split(" # ")[0].strip() for line in block.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def shell(command, timeout=3600):
    return run(["bash", "-o", "pipefail", "-c", command], cwd=ROOT, timeout=timeout)


def test_the_two_commands_name_make_up_and_make_test():
    assert fenced_block_after("## Two commands") == ["make up", "make test"]


def test_try_it_on_this_machine_as_written():
    commands = fenced_block_after("### Try it on this machine")
    assert commands[0] == "make up" and commands[-1] == "make down", commands
    up = shell(commands[0])
    assert "hello from slurmd-" in up.stdout + up.stderr and "as alice" in up.stdout + up.stderr, up.stderr[-3000:]
    outputs = {command: shell(command).stdout for command in commands[1:-1]}
    srun = next(out for command, out in outputs.items() if "srun -N2 hostname" in command)
    assert sorted(srun.split()) == ["slurmd-0", "slurmd-1"]
    pods = next(out for command, out in outputs.items() if "get pods" in command)
    assert len(re.findall(r" Running ", pods)) == 6, pods
    # `make down` tears its Slurm cluster down at once; the local Kubernetes then stops once the T3 tests
    # beside it have ended (localkube.py stop waits for LOCALKUBE_USERS_LOCK, which they hold)
    shell(commands[-1])
    status = subprocess.run([sys.executable, str(ROOT / "tests" / "localkube" / "localkube.py"), "status"],
                            capture_output=True, text=True, check=False)
    assert status.returncode == 1 and "ready" not in status.stdout, status.stdout
