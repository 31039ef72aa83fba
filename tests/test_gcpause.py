"""The collector pause around bulk work: off inside, and back as it was after, errors too."""

from __future__ import annotations

import gc

import pytest

from rebalancer.cluster.gcpause import gc_paused


@pytest.mark.parametrize("enabled", [True, False])
def test_the_pause_restores_the_state_it_found(enabled: bool) -> None:
    """Inside, the collector is off; after, on or off as before, also when the work raises."""
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError), gc_paused():
            raise RuntimeError
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
