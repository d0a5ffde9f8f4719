"""Every queue decision: key names, routing, atomic transitions, events, waits.

The RPC layer and the actor runtime talk to Redis only through this package.
"""

from gateway.model.job import STATUSES, TERMINAL, JobSpec
from gateway.supervisor.subscriptions import Subscription, SubscriptionOverflow
from gateway.supervisor.supervisor import Supervisor

__all__ = [
    "STATUSES",
    "TERMINAL",
    "JobSpec",
    "Subscription",
    "SubscriptionOverflow",
    "Supervisor",
]
