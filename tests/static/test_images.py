"""Static tier: the image's default Slurm major is written once, in images/slurm/slurm-majors' first line.

The Dockerfile needs its defaults as literals (`docker build` without build arguments); they must be that
line's, declared once before the first stage, and every stage takes them without a default of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "images" / "slurm" / "Dockerfile"
SLURM_MAJORS = ROOT / "images" / "slurm" / "slurm-majors"


def test_the_dockerfiles_defaults_are_the_first_line_of_slurm_majors():
    major, suite = next(line.split() for line in SLURM_MAJORS.read_text().splitlines()
                        if line.strip() and not line.startswith("#"))
    text = DOCKERFILE.read_text()
    before_first_stage = text[:text.index("\nFROM ")]
    assert re.findall(r"^ARG SLURM_MAJOR=(\S+)$", before_first_stage, re.M) == [major]
    assert re.findall(r"^ARG SUITE=(\S+)$", before_first_stage, re.M) == [suite]
    stages = text[len(before_first_stage):]
    assert re.findall(r"^ARG (?:SLURM_MAJOR|SUITE)=.*$", stages, re.M) == [], "a stage with a default of its own"
    assert re.search(r"^ARG SLURM_MAJOR$", stages, re.M), "no stage takes SLURM_MAJOR"
