"""Workloads in the middle of a rollout, whose pods are not evicted (``rollout``; pure).

A rollout is about to change the counts anyway, and an eviction would only race it.

Deployment. The Deployment controller numbers each template with the annotation
``deployment.kubernetes.io/revision``, on the ReplicaSet and, for the newest, on the Deployment
itself. A pod is skipped when

* its ReplicaSet's revision is below the newest one (the largest of the Deployment's own
  annotation and those of its ReplicaSets), i.e. the rollout still has to replace it, and the
  rollout is under way: the Deployment is not paused (``spec.paused``, or the Progressing
  condition's reason ``DeploymentPaused``) and has not given up (Progressing ``False``, reason
  ``ProgressDeadlineExceeded``). A Deployment missing from the snapshot counts as under way.
  Pods of the newest ReplicaSet stay candidates: they are the ones the rollout keeps.
* or the Deployment's ``status.observedGeneration`` lags ``metadata.generation``: the
  controller has not acted on a spec change yet, so a rollout (or a scale) may be starting.

StatefulSet: every pod of a StatefulSet whose ``status.currentRevision`` differs from
``status.updateRevision`` (both set) is skipped; the controller is still replacing pods, and
with ``OnDelete`` it waits for someone to delete them.

Example: Deployment ``web`` at revision 3 (Progressing True, ReplicaSetUpdated) owns
ReplicaSets ``web-a`` (revision 2, 2 pods) and ``web-b`` (revision 3, 1 pod): ``web-a``'s pods
are skipped, ``web-b``'s pod may go. Paused, all three may go.
"""

from __future__ import annotations

from rebalancer.core.model import Deployment, Pod, Snapshot
from rebalancer.core.plan import SkipCode, SkipReason

PAUSED_REASON = "DeploymentPaused"


def stopped(deployment: Deployment) -> bool:
    """The Deployment's rollout is paused or has given up (past its progress deadline)."""
    return (
        deployment.paused
        or deployment.progressing_reason == PAUSED_REASON
        or deployment.progressing_status == "False"
    )


class Rollouts:
    """Which controllers of a snapshot are mid-rollout, as skip reasons for their pods."""

    def __init__(self, snapshot: Snapshot) -> None:
        deployments = {(d.namespace, d.name): d for d in snapshot.deployments}
        newest: dict[tuple[str, str], int] = {
            key: d.revision for key, d in deployments.items() if d.revision is not None
        }
        for c in snapshot.controllers:
            owner = c.owner
            if c.kind == "ReplicaSet" and owner is not None and owner.kind == "Deployment":
                key = (c.namespace, owner.name)
                if c.revision is not None:
                    newest[key] = max(newest.get(key, c.revision), c.revision)
        self._reasons: dict[tuple[str, str, str], SkipReason] = {}
        for c in snapshot.controllers:
            reason: SkipReason | None = None
            if c.kind == "StatefulSet":
                if c.current_revision and c.update_revision != c.current_revision:
                    reason = SkipReason(
                        SkipCode.ROLLOUT,
                        f"StatefulSet {c.name} is rolling out (currentRevision "
                        f"{c.current_revision}, updateRevision {c.update_revision})",
                    )
            elif c.kind == "ReplicaSet" and c.owner is not None and c.owner.kind == "Deployment":
                reason = self._replica_set(
                    c.name,
                    c.revision,
                    c.owner.name,
                    deployments.get((c.namespace, c.owner.name)),
                    newest.get((c.namespace, c.owner.name)),
                )
            if reason is not None:
                self._reasons[(c.kind, c.namespace, c.name)] = reason

    @staticmethod
    def _replica_set(
        name: str,
        revision: int | None,
        owner: str,
        deployment: Deployment | None,
        newest: int | None,
    ) -> SkipReason | None:
        if deployment is not None and deployment.observed_generation < deployment.generation:
            return SkipReason(
                SkipCode.ROLLOUT,
                f"Deployment {owner} has a spec change its controller has not acted on yet "
                f"(observedGeneration {deployment.observed_generation} < generation "
                f"{deployment.generation})",
            )
        if revision is None or newest is None or revision >= newest:
            return None
        if deployment is not None and stopped(deployment):
            return None
        return SkipReason(
            SkipCode.ROLLOUT,
            f"ReplicaSet {name} (revision {revision}) is being replaced by Deployment {owner}'s "
            f"revision {newest}",
        )

    def reason(self, pod: Pod) -> SkipReason | None:
        """``rollout`` when the pod's controller is mid-rollout, else None."""
        owner = pod.owner
        if owner is None or not self._reasons:
            return None
        return self._reasons.get((owner.kind, pod.namespace, owner.name))
