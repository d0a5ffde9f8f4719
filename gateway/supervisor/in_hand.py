"""The runs an actor link has given its caller and not had reported yet.

Kept by job id *and run* (the token hero.lua's ``take`` gives each run):
a report Redis recorded but whose reply was lost is sent again, and by
then the job's next attempt may be held by the same actor (claimed in that
very reply, with no retry backoff, or handed over meanwhile); and a job
deleted while it runs may still be ending when a job created again under
its id is handed to the same actor, as the same attempt. Neither run's
report may hide the other from ``ActorLink.adopt`` or take it off the count
of runs in hand, which ``hero_cycle`` subtracts from the held list to know
how many jobs are still on their way (its ``holding``). A run without a
token (a library before them) is told apart by its attempt, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gateway.model.claim import Claimed, Outcome

#: A run in hand: its job id and its token.
Run = tuple[str, str]
#: What tells a run apart, a claimed one or a reported one: its job id, token,
#: and attempt (for a run without a token).
RunKey = tuple[str, str, int]


def run_key(run: Claimed | Outcome) -> RunKey:
    return run.job_id, run.run, run.attempt


class InHand:
    """Runs claimed, handed over or adopted, and their attempts."""

    def __init__(self) -> None:
        self._runs: dict[Run, int] = {}
        #: Reports sent in a cycle whose reply never came (lost, or the call
        #: refused as a whole): Redis may have recorded them already.
        self._unsure: set[RunKey] = set()

    def __len__(self) -> int:
        return len(self._runs)

    def __contains__(self, job_id: object) -> bool:
        return any(held == job_id for held, _ in self._runs)

    def has(self, job: Claimed) -> bool:
        """Whether ``job``'s run is in hand (running, or ended and its report
        not recorded yet), so adopting it would run it twice."""
        if job.run:
            return (job.job_id, job.run) in self._runs
        return self._runs.get((job.job_id, "")) == job.attempt

    def take(self, jobs: Iterable[Claimed]) -> None:
        for job in jobs:
            self._runs[job.job_id, job.run] = job.attempt

    def holding(self, outcomes: Iterable[Outcome]) -> int:
        """How many runs stay in hand once ``outcomes`` are reported."""
        gone = {self._reported(o) for o in outcomes} - {None}
        return len(self._runs) - len(gone)

    def checked(self, outcomes: Sequence[Outcome]) -> list[int]:
        """The attempt Redis checks each of ``outcomes`` against (0: none).
        One sent again names its attempt, so Redis passes it over when it
        recorded it already and runs a later attempt of the job now. A first
        report names none: the job hash's attempt is anyone's to write, and a
        report passed over for it left its job in the actor's held list,
        holding a slot for ever."""
        if not self._unsure:  # the usual cycle
            return [0] * len(outcomes)
        return [o.attempt if run_key(o) in self._unsure else 0 for o in outcomes]

    def unsure(self, outcomes: Iterable[Outcome]) -> None:
        """A cycle sending ``outcomes`` got no reply: they go again, as sent again."""
        self._unsure.update(run_key(o) for o in outcomes)

    def settle(self, outcomes: Iterable[Outcome]) -> None:
        """Redis recorded ``outcomes``: their runs leave the hand (another run
        of the same job stays)."""
        for o in outcomes:
            self._unsure.discard(run_key(o))
            run = self._reported(o)
            if run is not None:
                del self._runs[run]

    def _reported(self, outcome: Outcome) -> Run | None:
        """The run in hand ``outcome`` reports: the one it names; for a report
        without a token, its job's run without one, if of its attempt (any
        attempt, for a report naming none)."""
        named = (outcome.job_id, outcome.run)
        attempt = self._runs.get(named)
        if attempt is None or (not outcome.run and outcome.attempt not in (0, attempt)):
            return None
        return named
