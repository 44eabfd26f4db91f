"""Renewal dates of monthly subscriptions.

A subscription started on day D renews on day D of each following month; when a month
is shorter, it renews on that month's last day (Jan 31 -> Feb 28/29 -> Mar 31).
"""
from datetime import date

from dateutil.relativedelta import relativedelta


def next_renewal(start: date, renewals: int) -> date:
    """The date of the given renewal (1 = the first) of a subscription started on start."""
    if renewals < 1:
        raise ValueError("renewals must be at least 1")
    return start + relativedelta(months=renewals - 1)


def period_days(start: date, renewals: int) -> int:
    """Days in the billing period that ends with the given renewal."""
    end = next_renewal(start, renewals)
    begin = start if renewals == 1 else next_renewal(start, renewals - 1)
    return (end - begin).days
