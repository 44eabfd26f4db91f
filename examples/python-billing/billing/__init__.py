"""Billing-period helpers."""
from .periods import next_renewal, period_days

__all__ = ["next_renewal", "period_days"]
