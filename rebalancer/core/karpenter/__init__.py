"""Karpenter's rules, in one place (pure): a node autoscaler that adds nodes for pods and takes
nodes away itself (SPEC §5.9, §5.10).

* :mod:`~rebalancer.core.karpenter.marks`: the names Karpenter writes and reads, and what they
  say: a node being disrupted, a pod it must not disrupt, a node drifted from its NodePool;
* :mod:`~rebalancer.core.karpenter.nodepools`: whether a NodePool can add a node for a pod in a
  topology domain, within its limits, and the nodes one plan's waiting replacements imply;
* :mod:`~rebalancer.core.karpenter.newnodes`: the one object the scheduler simulation asks
  about nodes that do not exist yet;
* :mod:`~rebalancer.core.karpenter.drains`: the pods that replace those a drain moved (the
  thrash guard goes around them), and the landings on drifted nodes (a landing hold).

The folder sits below the planner: it imports nothing of the simulation or of the planning
pass, which ask it (an import contract in pyproject.toml keeps it so). Which way a replacement
that waits for a new node goes (a CapacityBuffer reserved first, or evicted and awaited) is
the planner's, next door (:mod:`rebalancer.core.capacity`): its back-off is a landing hold.
"""
