"""The pairwise sampling of parameter matrices (support/sampling.py): every value, and at strength
2 every pair of values, of the full matrix stays in the kept cases; the choice is deterministic;
AETHERCL_TEST_STRENGTH is read strictly."""
import itertools

import pytest

from support.sampling import pairwise_cover, strength_cap


def matrix(**values):
    names = sorted(values)
    return [dict(zip(names, combination))
            for combination in itertools.product(*(values[name] for name in names))]


def combinations_of(cases, strength):
    names = sorted(cases[0])
    return {tuple((name, case[name]) for name in chosen)
            for case in cases for chosen in itertools.combinations(names, strength)}


@pytest.mark.parametrize("strength", [1, 2])
def test_every_combination_of_the_full_matrix_is_kept(strength):
    cases = matrix(dtype=["f32", "f16", "bf16"], trans=["nn", "nt", "tn", "tt"], m=[1, 17, 64],
                   split=[0, 1])
    kept = pairwise_cover(cases, strength)
    assert combinations_of([cases[i] for i in kept], strength) == combinations_of(cases, strength)
    assert len(kept) < len(cases)
    assert kept == sorted(set(kept))


def test_strength_one_keeps_no_more_cases_than_the_largest_parameter_has_values():
    cases = matrix(a=range(5), b=range(3), c=range(2))
    assert len(pairwise_cover(cases, 1)) == 5


def test_strength_zero_keeps_one_case():
    cases = matrix(a=range(5), b=range(3), c=range(2))
    assert pairwise_cover(cases, 0) == [0]


def test_the_choice_is_deterministic():
    cases = matrix(a=range(4), b=range(4), c=range(3))
    assert pairwise_cover(cases) == pairwise_cover([dict(case) for case in cases])


def test_degenerate_matrices():
    assert pairwise_cover([]) == []
    one_parameter = matrix(a=range(6))
    assert pairwise_cover(one_parameter, 2) == list(range(6))


def test_strength_cap_reads_the_environment_strictly(monkeypatch):
    monkeypatch.delenv("AETHERCL_TEST_STRENGTH", raising=False)
    assert strength_cap() is None
    monkeypatch.setenv("AETHERCL_TEST_STRENGTH", "1")
    assert strength_cap() == 1
    monkeypatch.setenv("AETHERCL_TEST_STRENGTH", "0")
    assert strength_cap() == 0
    monkeypatch.setenv("AETHERCL_TEST_STRENGTH", "3")
    with pytest.raises(ValueError, match="AETHERCL_TEST_STRENGTH"):
        strength_cap()
