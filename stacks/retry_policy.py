"""The workflow's retry policies: one named class per kind of task (`retry` in cdk.json).

A policy is one ASL retrier minus where it goes; JitterStrategy is always FULL. Which class a
task uses, and the checks across policies, are SagaConfig's (stacks/config.py); the closed form
of "the pending retrier outlasts a lease" is here (`full_jitter_total_wait_below`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Annotated, Any, ClassVar

from pydantic import Field, ValidationInfo, field_validator, model_validator

from stacks.context import ContextSection, invalid, positive_int, string_list
from stacks.lambda_errors import LAMBDA_INVOKE_ERRORS, ErrorNamesError, expand_error_names

# Invoke-level faults (stacks/lambda_errors.py) are retried by every class unless it says which.
DEFAULT_RETRY_ERRORS: tuple[str, ...] = ("TransientError", *LAMBDA_INVOKE_ERRORS)
PENDING_ERRORS: tuple[str, ...] = ("ActionPending",)
PENDING_CLASS = "pending"
# Retries beyond these are left out of the probability: fewer waits only make it larger.
_JITTER_RETRIES_COUNTED = 64
# Step Functions limits on retrier fields.
_MAX_RETRY_ATTEMPTS = 99_999_999
_MAX_DELAY_SECONDS = 31_622_400


class RetryPolicy(ContextSection):
    """One retrier of the ASL, minus ErrorEquals' placement: JitterStrategy is always FULL."""

    _unknown_hint: ClassVar[str] = " (JitterStrategy is always FULL)"

    name: str
    error_equals: tuple[str, ...] = Field(alias="ErrorEquals")
    interval_seconds: Annotated[int, positive_int(_MAX_DELAY_SECONDS)] = Field(
        alias="IntervalSeconds"
    )
    max_attempts: int = Field(alias="MaxAttempts")
    backoff_rate: float = Field(alias="BackoffRate")
    max_delay_seconds: Annotated[int, positive_int(_MAX_DELAY_SECONDS)] = Field(
        alias="MaxDelaySeconds"
    )

    @model_validator(mode="before")
    @classmethod
    def _default_errors(cls, value: Any) -> Any:
        if isinstance(value, Mapping) and not {"ErrorEquals", "error_equals"} & set(value):
            errors = PENDING_ERRORS if value.get("name") == PENDING_CLASS else DEFAULT_RETRY_ERRORS
            return {**value, "ErrorEquals": list(errors)}
        return value

    @field_validator("error_equals", mode="before")
    @classmethod
    def _errors(cls, value: Any) -> tuple[str, ...]:
        errors = string_list(value)
        if "States.ALL" in errors:
            raise invalid(
                "must not use States.ALL: rejections and uncertain outcomes are never blindly "
                "retried (docs/design.md §4)"
            )
        try:
            return tuple(expand_error_names(errors))
        except ErrorNamesError as exc:
            raise invalid(str(exc)) from None

    @field_validator("max_attempts", mode="before")
    @classmethod
    def _max_attempts(cls, value: Any) -> int:
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 <= value <= _MAX_RETRY_ATTEMPTS
        ):
            raise invalid(f"must be an integer in 0..{_MAX_RETRY_ATTEMPTS}, got {value!r}")
        return value

    @field_validator("backoff_rate", mode="before")
    @classmethod
    def _backoff(cls, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 1.0:
            raise invalid(f"must be a number >= 1.0, got {value!r}")
        return float(value)

    @field_validator("max_delay_seconds")
    @classmethod
    def _delay_covers_interval(cls, value: int, info: ValidationInfo) -> int:
        interval = info.data.get("interval_seconds")
        if interval is not None and value < interval:
            raise invalid(f"({value}) must be >= IntervalSeconds ({interval})")
        return value

    def jitter_caps(self) -> list[float]:
        """FULL jitter's upper bound of each retry's wait: min(MaxDelay, Interval * Backoff**n)."""
        return [
            min(float(self.max_delay_seconds), self.interval_seconds * self.backoff_rate**n)
            for n in range(self.max_attempts)
        ]

    def to_retrier(self, error_equals: Sequence[str] | None = None) -> dict[str, Any]:
        """The ASL Retry entry, with all six fields."""
        return {
            "ErrorEquals": list(error_equals if error_equals is not None else self.error_equals),
            "IntervalSeconds": self.interval_seconds,
            "MaxAttempts": self.max_attempts,
            "BackoffRate": self.backoff_rate,
            "MaxDelaySeconds": self.max_delay_seconds,
            "JitterStrategy": "FULL",
        }


def full_jitter_total_wait_below(policy: RetryPolicy, seconds: int) -> Fraction:
    """P(the retries' FULL-jitter waits add up to less than `seconds`), exactly, as a fraction.

    The waits are independent, uniform on [0, c_n] (RetryPolicy.jitter_caps). For uniform
    summands, P(sum < t) = sum over subsets J of (-1)^|J| (t - sum_J c)_+^n / (n! prod c) (the
    volume of the box [0, c_1] x ... x [0, c_n] below the plane sum = t). Terms are grouped by
    sum_J c, which takes fewer than t values once the caps are whole seconds. Caps are rounded
    down to whole seconds and only the first 64 retries count: both can only make waits
    shorter, so the result is exact for cdk.json's whole-second policies and otherwise an upper
    bound. Zero retries never wait long enough: 1.
    """
    caps = [math.floor(c) for c in policy.jitter_caps()[:_JITTER_RETRIES_COUNTED]]
    if not caps:
        return Fraction(1)
    # coefficients[s] = sum over subsets J with sum_J c = s of (-1)^|J|; s < seconds only.
    coefficients = {0: 1}
    for cap in caps:
        if cap >= seconds:
            continue  # a subset containing it sums past `seconds`: its terms vanish
        grown = dict(coefficients)
        for total, coefficient in coefficients.items():
            if total + cap < seconds:
                grown[total + cap] = grown.get(total + cap, 0) - coefficient
        coefficients = grown
    n = len(caps)
    volume = sum(c * (seconds - total) ** n for total, c in coefficients.items())
    return min(Fraction(1), Fraction(volume, math.factorial(n) * math.prod(caps)))
