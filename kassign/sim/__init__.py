"""kassign.sim: a deterministic discrete-event simulator of a consumer group under the classic
group protocol (eager and cooperative rebalancing), against Apache Kafka's or Tansu's
coordinator, calling kassign's real assignors.

>>> from kassign.sim import Scenario, ScaleOut, SimConfig, simulate
>>> result = simulate(Scenario(3, {"orders": 24}).then(ScaleOut(3)), SimConfig(assignor="cooperative-sticky"))
>>> result.metrics["1:scale_out"].rounds
2
"""

from kassign.sim.config import BROKER_MODELS, CLIENT_PRESETS, SimConfig
from kassign.sim.member import SimulationError
from kassign.sim.scenarios import (
    SCENARIO_KINDS,
    Crash,
    Flap,
    PartitionIncrease,
    RollingRestart,
    ScaleIn,
    ScaleOut,
    Scenario,
    Step,
    SubscriptionChange,
    make_scenario,
    random_scenario,
)
from kassign.sim.simulator import ASSIGNOR_CLASSES, SimResult, make_assignor_factory, simulate

__all__ = [
    "SimConfig",
    "BROKER_MODELS",
    "CLIENT_PRESETS",
    "SimulationError",
    "Scenario",
    "Step",
    "ScaleOut",
    "ScaleIn",
    "RollingRestart",
    "Crash",
    "Flap",
    "SubscriptionChange",
    "PartitionIncrease",
    "SCENARIO_KINDS",
    "make_scenario",
    "random_scenario",
    "SimResult",
    "simulate",
    "make_assignor_factory",
    "ASSIGNOR_CLASSES",
]
