"""Rebalance timelines: the JSON-lines event schema that the integration driver, the telemetry
recorder and the simulator all write (:mod:`.events`), the metrics computed from a timeline
(:mod:`.metrics`), and its rendering as a PNG (:mod:`.plot`)."""
