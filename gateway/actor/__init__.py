"""The worker runtime: pops what the supervisor dispatched and runs it.

Write an actor for your own script type with the SDK::

    from gateway.actor import Actor, JobContext
    from gateway.config import resolve

    actor = Actor(resolve(), group="g1", instance="i1", concurrency=4)

    @actor.handler("osis")
    def run(ctx: JobContext) -> str:
        return ctx.job.script.upper()

    actor.run()
"""

from gateway.actor.context import JobContext, JobFailed
from gateway.actor.runtime import Actor, python_actor

__all__ = ["Actor", "JobContext", "JobFailed", "python_actor"]
