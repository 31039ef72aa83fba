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
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from rebalancer.cli.errorline import say
from rebalancer.core.errors import InputError

if TYPE_CHECKING:
    from rebalancer.cli.metrics import Metrics
    from rebalancer.cluster.act.runner import RunReport
    from rebalancer.core.plan import Plan

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
        default=DEFAULT_JOB,
        help=f"the job label the metrics are pushed under (default {DEFAULT_JOB}); each push "
        "replaces the previous run's",
    )


def check_pushgateway_args(args: argparse.Namespace) -> None:
    """Exit 2 before anything is read or sent when the URL or job cannot be used."""
    url = getattr(args, "pushgateway", None)
    if not url:
        return
    problems = []
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(f"--pushgateway: must be an http:// or https:// URL, got {url!r}")
    if not args.pushgateway_job or "/" in args.pushgateway_job:
        problems.append(
            f"--pushgateway-job: must be a non-empty name without '/', got {args.pushgateway_job!r}"
        )
    if problems:
        raise InputError("arguments", problems)


def push_metrics(args: argparse.Namespace, metrics: Metrics) -> None:
    try:
        metrics.push(args.pushgateway, args.pushgateway_job)
    except OSError as exc:  # URLError and HTTP errors are OSErrors
        say(f"rebalancer: warning: could not push the metrics to {args.pushgateway}: {exc}")


def push_plan(args: argparse.Namespace, planned: Plan) -> None:
    """After ``plan`` or ``run --dry-run``: the plan's metrics (nothing evicted)."""
    from rebalancer.cli.metrics import Metrics  # noqa: PLC0415  # prometheus on use

    metrics = Metrics()
    metrics.record_plan(planned, time.monotonic() - _STARTED)
    push_metrics(args, metrics)


def push_report(args: argparse.Namespace, report: RunReport, *, evicting: bool) -> None:
    """After a one-shot ``run``: the run's metrics."""
    from rebalancer.cli.metrics import Metrics  # noqa: PLC0415  # prometheus on use

    metrics = Metrics(evicting=evicting)
    metrics.record(report)
    push_metrics(args, metrics)


def push_error(args: argparse.Namespace) -> None:
    """A one-shot ``run`` that ended with an error: ``rebalancer_runs_total{result="error"}``."""
    from rebalancer.cli.metrics import Metrics  # noqa: PLC0415  # prometheus on use

    metrics = Metrics()
    metrics.record_error()
    push_metrics(args, metrics)
