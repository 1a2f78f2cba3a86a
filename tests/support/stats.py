"""Figures of the benchmarks (benchmarks/): percentiles of measured durations."""

from __future__ import annotations


def percentile(values, fraction):
    """The value at `fraction` (0.5: the median, 0.99) of `values`, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]
