"""Pairwise sampling of large parameter matrices: every value of every parameter, and every pair of
values of two parameters, appears in at least one kept case (AETHERCL_TEST_FULL=1 keeps them all)."""
import itertools
import os


def full_matrix_requested():
    return os.environ.get("AETHERCL_TEST_FULL", "").strip().lower() in ("1", "true", "yes", "on")


def pairwise_cover(cases):
    """The indices of a subset of `cases` (dicts of parameter name -> value id, all with the same
    names) that covers every pair of values, chosen greedily and deterministically: each round
    keeps the first case that covers the most pairs not yet covered."""
    if not cases:
        return []
    names = sorted(cases[0])
    if len(names) < 2:
        return list(range(len(cases)))

    def pairs(case):
        return {(a, case[a], b, case[b]) for a, b in itertools.combinations(names, 2)}

    case_pairs = [pairs(case) for case in cases]
    uncovered = set().union(*case_pairs)
    kept = []
    while uncovered:
        best = max(range(len(cases)), key=lambda i: (len(case_pairs[i] & uncovered), -i))
        kept.append(best)
        uncovered -= case_pairs[best]
    return sorted(kept)
