"""The power-save program, images/slurm/slurm_k8s_power.py, for every tier: where it is, importing it,
and the command line the powersave role's wrappers run it with (Slurm gives its programs no PATH, so
the wrappers name the interpreter by its absolute path, in isolated mode)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

PROGRAM = Path(__file__).resolve().parents[2] / "images" / "slurm" / "slurm_k8s_power.py"
INTERPRETER = ("/usr/bin/python3", "-I")


def load():
    """The program as a module (a plain import: it is a .py file)."""
    if str(PROGRAM.parent) not in sys.path:
        sys.path.insert(0, str(PROGRAM.parent))
    return importlib.import_module(PROGRAM.stem)


def command(*args, program=PROGRAM):
    """argv of a run as the wrappers start it: /usr/bin/python3 -I <program> ARGS..."""
    return [*INTERPRETER, str(program), *map(str, args)]
