"""Kafka's sticky assignors: the eager ``sticky`` (:mod:`.assignor`) and ``cooperative-sticky``
(:mod:`.cooperative`), and the parts of the one sticky assignment they share: the quota-based path
for equal subscriptions (:mod:`.constrained`), the general path (:mod:`.general`), previous
ownership by generation (:mod:`.ownership`), rack refinement (:mod:`.refine`) and the reader of
the members' user data (:mod:`.user_data_reader`)."""

from kassign.assignors.sticky.assignor import AbstractStickyAssignor, StickyAssignor
from kassign.assignors.sticky.cooperative import CooperativeStickyAssignor

__all__ = ["AbstractStickyAssignor", "StickyAssignor", "CooperativeStickyAssignor"]
