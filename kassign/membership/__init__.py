"""The group member's rules, once, without a client or I/O (in the spirit of sans-I/O protocol
libraries): fed with what happened (a JoinGroup is due, the leader was elected, a SyncGroup
answered, the member leaves or is fenced), they say what to do (which partitions to revoke, lose,
add and keep, what to assign as leader, whether and why to rejoin) and keep the member's state.

Both drivers run these same rules: the aiokafka coordinator (:mod:`kassign.adapters.aiokafka`)
turns the answers into requests and listener calls, the simulator (:mod:`kassign.sim`) into
events on its clock.

* :mod:`kassign.membership.classic` -- a member of the classic group protocol (JoinGroup/SyncGroup),
  eager or cooperative (KIP-429), as Java's ``ConsumerCoordinator`` runs it;
* :mod:`kassign.membership.leader` -- the leader's round: assign, check the cooperative rule, keep a
  round exclusive when some members' metadata is unreadable, mark the fast follow-up;
* :mod:`kassign.membership.follow_up` -- kassign's fast follow-up decisions;
* :mod:`kassign.membership.consumer_group` -- a member of the next-generation consumer group protocol
  (KIP-848, ConsumerGroupHeartbeat): the broker assigns, the member heartbeats and reconciles, with
  the same vocabulary (owned partitions, revocation, loss).
"""

from kassign.membership.classic import ClassicMember, JoinPreparation, SyncOutcome, select_rebalance_protocol
from kassign.membership.consumer_group import ConsumerGroupFatalError, ConsumerGroupMember, MemberState
from kassign.membership.follow_up import FollowUpPolicy, mark_assignments
from kassign.membership.leader import (
    GroupAssignment,
    IllegalCooperativeAssignment,
    InvalidAssignment,
    assign_group,
    check_cooperative_assignment,
    exclude_unreadable,
)

__all__ = [
    "ClassicMember",
    "JoinPreparation",
    "SyncOutcome",
    "select_rebalance_protocol",
    "ConsumerGroupMember",
    "ConsumerGroupFatalError",
    "MemberState",
    "FollowUpPolicy",
    "mark_assignments",
    "GroupAssignment",
    "IllegalCooperativeAssignment",
    "InvalidAssignment",
    "assign_group",
    "check_cooperative_assignment",
    "exclude_unreadable",
]
