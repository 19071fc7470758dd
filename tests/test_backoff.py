"""Every retry loop waits by one rule: the delay doubles from the first and stops at the cap."""

from kctl.backoff import Backoff


def test_the_delay_doubles_from_the_first_up_to_the_cap():
    backoff = Backoff(first=0.5, cap=10.0)
    assert [backoff.delay(n) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_another_factor_grows_by_it():
    assert [Backoff(first=1, cap=100, factor=3).delay(n) for n in (1, 2, 3)] == [1, 3, 9]
