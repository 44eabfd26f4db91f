from datetime import date

import pytest

from billing import next_renewal, period_days


def test_first_renewal_is_one_month_later():
    assert next_renewal(date(2024, 3, 15), 1) == date(2024, 4, 15)


def test_month_end_is_kept():
    start = date(2024, 1, 31)
    assert next_renewal(start, 1) == date(2024, 2, 29)
    assert next_renewal(start, 2) == date(2024, 3, 31)


def test_period_days():
    assert period_days(date(2024, 1, 31), 1) == 29


def test_renewals_must_be_positive():
    with pytest.raises(ValueError):
        next_renewal(date(2024, 1, 1), 0)
