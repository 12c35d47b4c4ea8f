"""The simulator held against recorded real groups: tooling of the repository, not of the library.

It reads the recordings under the checkout's ``data/`` (which the wheel does not ship), so it is left
out of the wheel and nothing in :mod:`kassign.sim` imports it; it only imports the simulator.

* :mod:`~kassign.sim.calibration.timelines`: against the Kafka 3.7 groups of ``data/rebalance-timelines``;
* :mod:`~kassign.sim.calibration.benchmark`: against the Kafka 4.4 benchmark recordings
  (``data/rebalance-bench-kafka44``), replayed through :mod:`~kassign.sim.calibration.harness`, the
  benchmark's harness in the simulator;
* :mod:`~kassign.sim.calibration.consumer_protocol`: the same for the KIP-848 recordings;
* :mod:`~kassign.sim.calibration.group_size`: predicting ``benchmarks/group_size.py``'s groups of 6,
  24 and 96 members with the presets as they are;
* :mod:`~kassign.sim.calibration.fit`: refitting a client's latency presets on them;
* ``python -m kassign.sim.calibration`` (:mod:`~kassign.sim.calibration.cli`): all of it from the command line.
"""
