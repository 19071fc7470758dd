"""Every retry loop waits by one rule: the delay doubles from the first and stops at the cap."""

from kctl.backoff import Backoff


def test_the_delay_doubles_from_the_first_up_to_the_cap():
    backoff = Backoff(first=0.5, cap=10.0)
    assert [backoff.delay(n) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_another_factor_grows_by_it():
    assert [Backoff(first=1, cap=100, factor=3).delay(n) for n in (1, 2, 3)] == [1, 3, 9]


def test_a_loop_that_retries_for_ever_waits_the_cap_and_does_not_overflow():
    # a sink whose put() keeps failing with retries unbounded counts past any exponent a
    # float holds; the wait stays the cap
    assert Backoff(first=0.3, cap=60.0).delay(5000) == 60.0
    assert Backoff(first=1, cap=30, factor=2).delay(10**6) == 30.0
