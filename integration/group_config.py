"""Per-group settings of a KIP-848 consumer group, for tests and benchmarks.

The implementation lives in :mod:`kassign.broker.group_config` (the demo needs it too, and nothing
in ``kassign`` may import ``integration``); this module keeps the tests' and benchmarks' import path.
"""

from __future__ import annotations

from kassign.broker.group_config import GroupTimingRefused, consumer_group_type, set_consumer_group_timing

__all__ = ["GroupTimingRefused", "consumer_group_type", "set_consumer_group_timing"]
