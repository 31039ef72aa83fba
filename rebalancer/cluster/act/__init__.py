"""Acting on a cluster: the run loop, evictions, steering writes, the Lease, Events."""
