"""rebalancer: repairs topology spread with the fewest evictions, only through the Eviction API."""

__version__ = "0.1.0"
