"""``--pushgateway URL``: a one-shot ``plan`` or ``run`` (a CronJob's) pushes its metrics.

A CronJob's run ends before Prometheus could scrape it, so at the end of the run its metrics
(those of :mod:`rebalancer.cli.metrics`, for that one run) replace the job's group on a
Prometheus Pushgateway. A push that fails is reported on stderr and does not change the exit
code: the run's own result is what the exit code tells.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from rebalancer.cli.errorline import say
from rebalancer.core.api import InputError

if TYPE_CHECKING:
    from rebalancer.cli.metrics import Metrics
    from rebalancer.core.api import Plan

PUSHGATEWAY_ENV: Final = "REBALANCER_PUSHGATEWAY"
DEFAULT_JOB: Final = "rebalancer"
_STARTED: Final = time.monotonic()


def add_pushgateway_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pushgateway",
        metavar="URL",
        default=os.environ.get(PUSHGATEWAY_ENV) or None,
        help="push this run's metrics to the Prometheus Pushgateway at URL when it ends, e.g. "
        f"http://pushgateway.monitoring:9091 (default ${PUSHGATEWAY_ENV}; off when unset)",
    )
    parser.add_argument(
        "--pushgateway-job",
        metavar="NAME",
        help=f"the job label the metrics are pushed under (default {DEFAULT_JOB}); each push "
        "replaces the previous run's",
    )


@dataclass(frozen=True, slots=True)
class Pushgateway:
    """``--pushgateway`` and ``--pushgateway-job``, checked."""

    url: str
    job: str


def pushgateway_of(args: argparse.Namespace) -> Pushgateway | None:
    """The Pushgateway asked for, if any; exit 2 before anything is read or sent when the URL
    or job cannot be used."""
    url = getattr(args, "pushgateway", None)
    job = getattr(args, "pushgateway_job", None)
    if not url:
        if job is not None:
            raise InputError(
                "arguments", ["--pushgateway-job: only with --pushgateway (nothing is pushed)"]
            )
        return None
    problems = []
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(f"--pushgateway: must be an http:// or https:// URL, got {url!r}")
    job = DEFAULT_JOB if job is None else job
    if not job or "/" in job:
        problems.append(f"--pushgateway-job: must be a non-empty name without '/', got {job!r}")
    if problems:
        raise InputError("arguments", problems)
    return Pushgateway(url, job)


def push_metrics(gateway: Pushgateway, metrics: Metrics) -> None:
    try:
        metrics.push(gateway.url, gateway.job)
    except OSError as exc:  # URLError and HTTP errors are OSErrors
        say(f"rebalancer: warning: could not push the metrics to {gateway.url}: {exc}")


def push_plan(gateway: Pushgateway, planned: Plan) -> None:
    """After ``plan`` or ``run --dry-run``: the plan's metrics (nothing evicted)."""
    from rebalancer.cli.metrics import Metrics  # noqa: PLC0415  # prometheus on use

    metrics = Metrics()
    metrics.record_plan(planned, time.monotonic() - _STARTED)
    push_metrics(gateway, metrics)
