"""Erlang B / C against textbook values and an independent direct-sum implementation."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from gateway.pipeline import erlang

pytestmark = pytest.mark.timeout(30)


def direct_erlang_c(c: int, a: Fraction) -> Fraction:
    """Erlang C from its defining sum, in exact rational arithmetic."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


def direct_erlang_b(c: int, a: Fraction) -> Fraction:
    return (a**c / math.factorial(c)) / sum(a**k / math.factorial(k) for k in range(c + 1))


def test_erlang_c_textbook_small_cases() -> None:
    # M/M/3 with a = 2: P0 sum = 1 + 2 + 2 = 5, tail term = (8/6)·3 = 4, C = 4/9.
    assert erlang.erlang_c(3, 2.0) == pytest.approx(4 / 9, rel=1e-12)
    # M/M/1: C = rho; M/M/2: C = a² / (2 + a).
    for a in (0.1, 0.5, 0.9):
        assert erlang.erlang_c(1, a) == pytest.approx(a, rel=1e-12)
        assert erlang.erlang_c(2, 2 * a) == pytest.approx((2 * a) ** 2 / (2 + 2 * a), rel=1e-12)


def test_erlang_b_table_values() -> None:
    # Erlang B tables: 5 Erlangs on 10 lines block 1.838 %, 2 Erlangs on 5 lines 3.670 %.
    assert erlang.erlang_b(10, 5.0) == pytest.approx(0.018385, abs=5e-7)
    assert erlang.erlang_b(5, 2.0) == pytest.approx(0.036697, abs=5e-7)
    assert erlang.erlang_b(0, 3.0) == 1.0


def test_call_centre_example() -> None:
    """The classic worked example: 100 calls per 30 min, 180 s handling time (a = 10 Erlangs).

    Probability of waiting with 11/12/13/14 agents: 68.21 %, 44.94 %, 28.53 %, 17.41 %;
    calls answered within 20 s: 38.96 %, 64.02 %, 79.56 %, 88.84 % — so an 80/20 target
    needs 14 agents.
    """
    lam, service = 100 / 1800, 180.0
    expected = {
        11: (0.6821, 0.3896),
        12: (0.4494, 0.6402),
        13: (0.2853, 0.7956),
        14: (0.1741, 0.8884),
    }
    for c, (p_wait, answered) in expected.items():
        assert erlang.erlang_c(c, lam * service) == pytest.approx(p_wait, abs=5e-5)
        assert 1 - erlang.wait_probability(c, lam, service, 20) == pytest.approx(answered, abs=5e-5)
    rec = erlang.recommend(lam, service, slo_wait=20, quantile=0.8)
    assert rec.actors == 14
    assert rec.offered_load == pytest.approx(10.0)
    assert rec.utilisation == pytest.approx(10 / 14)
    assert rec.slo_violation <= 0.2 < erlang.wait_probability(13, lam, service, 20)


@pytest.mark.parametrize(("c", "a"), [(1, "1/3"), (4, "3"), (7, "13/2"), (20, "15"), (50, "44")])
def test_matches_direct_sum(c: int, a: str) -> None:
    exact = Fraction(a)
    assert erlang.erlang_c(c, float(exact)) == pytest.approx(
        float(direct_erlang_c(c, exact)), rel=1e-10
    )
    assert erlang.erlang_b(c, float(exact)) == pytest.approx(
        float(direct_erlang_b(c, exact)), rel=1e-10
    )


def test_large_loads_stay_finite() -> None:
    # The recursion never forms a^c / c!, so hundreds of actors are fine.
    value = erlang.erlang_c(600, 570.0)
    assert 0 < value < 1
    rec = erlang.recommend(arrival_rate=95.0, mean_service=6.0, slo_wait=1.0)
    assert rec.actors > 570 and rec.slo_violation <= 0.05


def test_wait_quantile_inverts_the_tail() -> None:
    c, lam, service = 4, 3.0, 1.0
    t95 = erlang.wait_quantile(c, lam, service, 0.95)
    assert erlang.wait_probability(c, lam, service, t95) == pytest.approx(0.05, rel=1e-9)
    # Fewer than 5 % wait at all: the p95 wait is zero.
    assert erlang.wait_quantile(10, 1.0, 1.0, 0.95) == 0.0
    assert math.isinf(erlang.wait_quantile(2, 3.0, 1.0, 0.95))
    assert erlang.mean_wait(c, lam, service) == pytest.approx(erlang.erlang_c(4, 3.0) / (4 - 3))


def test_recommend_is_the_smallest_meeting_the_target() -> None:
    for lam, service, slo in ((3.0, 1.0, 0.5), (0.2, 30.0, 10.0), (12.0, 0.25, 0.0)):
        rec = erlang.recommend(lam, service, slo)
        assert rec.actors > lam * service
        assert erlang.wait_probability(rec.actors, lam, service, slo) <= 0.05
        below = rec.actors - 1
        if below > lam * service:
            assert erlang.wait_probability(below, lam, service, slo) > 0.05
        assert rec.quantile_wait <= slo + 1e-12


def test_no_arrivals_needs_one_actor() -> None:
    rec = erlang.recommend(0.0, 5.0, 1.0)
    assert rec.actors == 1 and rec.offered_load == 0 and rec.wait_probability == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda: erlang.erlang_c(-1, 1.0),
        lambda: erlang.erlang_b(3, float("nan")),
        lambda: erlang.recommend(1.0, 0.0, 1.0),
        lambda: erlang.recommend(-1.0, 1.0, 1.0),
        lambda: erlang.recommend(1.0, 1.0, -1.0),
        lambda: erlang.recommend(1.0, 1.0, 1.0, quantile=1.0),
    ],
)
def test_bad_inputs_raise_value_error(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]
