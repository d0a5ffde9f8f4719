"""The jobs an actor link has given its caller and not had reported yet.

Kept by job id *and attempt*: a report Redis recorded but whose reply was
lost is sent again, and by then the job's next attempt may be held by the
same actor (claimed in that very reply, with no retry backoff, or handed
over meanwhile). That report must neither hide the next attempt from
``ActorLink.adopt`` nor take it off the count of jobs in hand, which
``hero_cycle`` subtracts from the held list to know how many jobs are still
on their way (its ``holding``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gateway.model.library import Claimed, Outcome

#: A report of a job: its id and the attempt it ran.
Attempt = tuple[str, int]


class InHand:
    """Jobs claimed, handed over or adopted, by id: their attempt, and in
    stream mode the work stream's entry their report acks."""

    def __init__(self) -> None:
        self._attempts: dict[str, int] = {}
        #: Stream mode: the entry of each job this consumer runs.
        self.entries: dict[str, str] = {}
        #: Reports sent in a cycle whose reply never came (lost, or the call
        #: refused as a whole): Redis may have recorded them already.
        self._unsure: set[Attempt] = set()

    def __len__(self) -> int:
        return len(self._attempts)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._attempts

    def has(self, job: Claimed) -> bool:
        """Whether ``job``'s attempt is in hand (running, or ended and its
        report not recorded yet), so adopting it would run it twice."""
        return self._attempts.get(job.job_id) == job.attempt

    def take(self, jobs: Iterable[Claimed]) -> None:
        for job in jobs:
            self._attempts[job.job_id] = job.attempt
            if job.entry:
                self.entries[job.job_id] = job.entry

    def holding(self, outcomes: Iterable[Outcome]) -> int:
        """How many jobs stay in hand once ``outcomes`` are reported."""
        gone = {o.job_id for o in outcomes if o.job_id in self._attempts and self._reports(o)}
        return len(self._attempts) - len(gone)

    def checked(self, outcomes: Sequence[Outcome]) -> list[int]:
        """The attempt Redis checks each of ``outcomes`` against (0: none).
        One sent again names its attempt, so Redis passes it over when it
        recorded it already and runs a later attempt of the job now. A first
        report names none: the job hash's attempt is anyone's to write, and a
        report passed over for it left its job in the actor's held list,
        holding a slot for ever."""
        if not self._unsure:  # the usual cycle
            return [0] * len(outcomes)
        return [o.attempt if (o.job_id, o.attempt) in self._unsure else 0 for o in outcomes]

    def unsure(self, outcomes: Iterable[Outcome]) -> None:
        """A cycle sending ``outcomes`` got no reply: they go again, as sent again."""
        self._unsure.update((o.job_id, o.attempt) for o in outcomes)

    def settle(self, outcomes: Iterable[Outcome]) -> None:
        """Redis recorded ``outcomes``: their attempts leave the hand (a later
        attempt of the same job stays)."""
        for o in outcomes:
            self._unsure.discard((o.job_id, o.attempt))
            if self._reports(o):
                self._attempts.pop(o.job_id, None)
                self.entries.pop(o.job_id, None)

    def _reports(self, outcome: Outcome) -> bool:
        """Whether ``outcome`` reports the attempt in hand. A report naming
        no attempt counts, as does one of a job not in hand."""
        attempt = self._attempts.get(outcome.job_id)
        return attempt is None or outcome.attempt in (0, attempt)
