"""Scheduled EventBridge rules in the local AWS: `rate(...)` rules invoke their targets.

moto stores a rule's ScheduleExpression but never fires it. `RuleScheduler` reads the enabled
scheduled rules of the local account's default bus each tick and delivers a "Scheduled Event"
to their targets when a period has passed, as EventBridge does (the first time one period after
the scheduler saw the rule; a late tick fires once, it does not catch up on missed periods).
Time is the local AWS's clock (`saga.clock.now()`), so moving that clock moves the schedule.

An advance of the clock fires every rule whose period it passed once, before the advance
returns (as TTL deletion happens then), and reports their names: `sagactl local advance
--minutes 10` has run the sweeper exactly once when it returns, not at the thread's next poll a
moment later, so what a command after it sees does not depend on a race.

`sagactl local up` runs one (`LocalServer(run_schedules=True)`); tests drive `tick()` directly.
`cron(...)` expressions are not emulated (the stack uses none): such a rule is logged and skipped.
"""

from __future__ import annotations

import datetime
import logging
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from local_aws.event_rules import DEFAULT_BUS, deliver, render_target_input
from saga import clock as saga_clock

logger = logging.getLogger(__name__)

_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
DEFAULT_POLL_SECONDS = 1.0


def rate_seconds(expression: str) -> int | None:
    """The period of a `rate(N unit)` expression in seconds; None for anything else."""
    match = _RATE.match(expression.strip())
    if match is None:
        return None
    value, unit = int(match.group(1)), match.group(2)
    if value < 1 or (value == 1) == unit.endswith("s"):
        return None  # rate(1 minutes) and rate(5 minute) are invalid, as on AWS
    return value * _UNIT_SECONDS[unit.rstrip("s")]


def scheduled_event(rule_arn: str, account: str, region: str, when: float) -> dict[str, Any]:
    stamp = datetime.datetime.fromtimestamp(when, tz=datetime.UTC)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": account,
        "time": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [rule_arn],
        "detail": {},
    }


@dataclass
class RuleScheduler:
    """Fires the scheduled rules of one account and region of the local AWS."""

    account: str
    region: str
    clock: Callable[[], float] = saga_clock.now
    poll_seconds: float = DEFAULT_POLL_SECONDS
    _due: dict[str, float] = field(default_factory=dict)
    _skipped: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _ticking: threading.Lock = field(default_factory=threading.Lock)  # thread vs. an advance
    _thread: threading.Thread | None = None
    tick_count: int = 0  # ticks done (the thread's heartbeat)
    _firing: str | None = None  # what a tick delivers right now (`doing`)

    def _scheduled_rules(self) -> list[Any]:
        from moto.events.models import events_backends

        bus = events_backends[self.account][self.region].event_buses.get(DEFAULT_BUS)
        if bus is None:
            return []
        return [
            rule
            for rule in list(bus.rules.values())
            if rule.scheduled_expression and rule.state == "ENABLED"
        ]

    def tick(self) -> list[str]:
        """Fire every rule whose period has passed; returns the ARNs of the rules fired."""
        with self._ticking:
            return self._tick()

    def doing(self) -> str:
        """What the scheduler does at this moment, for whoever waits on it (an advance)."""
        return self._firing or "checking which scheduled rules are due"

    def on_clock_advance(self, _now: float) -> list[str]:
        """The clock's advance listener: the names of the rules the advance made fire."""
        return [arn.rpartition("/")[2] for arn in self.tick()]

    def _tick(self) -> list[str]:
        now = self.clock()
        fired: list[str] = []
        seen: set[str] = set()
        for rule in self._scheduled_rules():
            period = rate_seconds(rule.scheduled_expression)
            if period is None:
                if rule.arn not in self._skipped:
                    self._skipped.add(rule.arn)
                    logger.warning(
                        "rule %s: %s is not emulated locally", rule.name, rule.scheduled_expression
                    )
                continue
            seen.add(rule.arn)
            due = self._due.setdefault(rule.arn, now + period)
            if now < due:
                continue
            self._due[rule.arn] = now + period
            self._fire(rule, now)
            fired.append(rule.arn)
        # A rule deleted (or a reset account) starts a fresh period if it comes back.
        for arn in set(self._due) - seen:
            del self._due[arn]
        self.tick_count += 1
        return fired

    def _fire(self, rule: Any, now: float) -> None:
        logger.info("scheduled rule %s fires (%s)", rule.name, rule.scheduled_expression)
        event = scheduled_event(rule.arn, self.account, self.region, now)
        for target in list(rule.targets):
            name = str(target["Arn"]).rpartition(":")[2]
            self._firing = f"scheduled rule {rule.name} fired: running its target {name}"
            try:
                deliver(target, render_target_input(target, event, rule.arn, rule.name))
            except Exception:
                logger.exception("scheduled rule %s: target %s failed", rule.name, target["Arn"])
            finally:
                self._firing = None

    def _run(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                self.tick()
            except Exception:  # the scheduler outlives one bad tick
                logger.exception("scheduled rules: tick failed")

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="saga-schedules", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
