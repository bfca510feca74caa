"""Sampling of large parameter matrices: every value of every parameter, and (pairwise, the default)
every pair of values of two parameters, appears in at least one kept case (AETHERCL_TEST_FULL=1
keeps them all)."""
import itertools
import os


def full_matrix_requested():
    return os.environ.get("AETHERCL_TEST_FULL", "").strip().lower() in ("1", "true", "yes", "on")


def strength_cap():
    """AETHERCL_TEST_STRENGTH=1 keeps every value once instead of every pair (the sanitizer
    build's runs: they look for host-side memory errors, which the kernel variants a matrix
    multiplies do not add); 0 keeps one case of each matrix (the sanitizer build's runs of the
    GEMM suites, whose matrices are kernel variants); None: the markers' own strengths."""
    value = os.environ.get("AETHERCL_TEST_STRENGTH", "").strip()
    if not value:
        return None
    if value not in ("0", "1", "2"):
        raise ValueError(f"AETHERCL_TEST_STRENGTH must be 0, 1 or 2, not {value!r}")
    return int(value)


def pairwise_cover(cases, strength=2):
    """The indices of a subset of `cases` (dicts of parameter name -> value id, all with the same
    names) that covers every pair of values (strength 2) or every single value (strength 1),
    chosen greedily and deterministically: each round keeps the case that covers the most
    combinations not yet covered, of those the one whose values were kept least often."""
    if not cases:
        return []
    names = sorted(cases[0])
    if len(names) < strength:
        return list(range(len(cases)))

    def pairs(case):
        return {tuple(item for name in combination for item in (name, case[name]))
                for combination in itertools.combinations(names, strength)}

    case_pairs = [pairs(case) for case in cases]
    uncovered = set().union(*case_pairs)
    kept = []
    used = {}  # how often each value was kept: ties go to the case of the least-used values
    while uncovered:
        best = max(range(len(cases)), key=lambda i: (
            len(case_pairs[i] & uncovered),
            -sum(used.get((name, cases[i][name]), 0) for name in names), -i))
        kept.append(best)
        uncovered -= case_pairs[best]
        for name in names:
            used[(name, cases[best][name])] = used.get((name, cases[best][name]), 0) + 1
    return sorted(kept)
