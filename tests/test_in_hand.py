"""The runs an actor link has in hand, kept by run or attempt (gateway.supervisor.in_hand)."""

from __future__ import annotations

from gateway.model.claim import Claimed, Outcome
from gateway.supervisor.in_hand import InHand


def claimed(job_id: str, attempt: int, run: str = "") -> Claimed:
    return Claimed(job_id, "", "osis", 60, {}, "", "", attempt, 1, run=run)


def test_a_report_of_an_earlier_attempt_leaves_the_later_one_in_hand() -> None:
    hand = InHand()
    hand.take([claimed("x", 2), claimed("y", 1)])
    stale = Outcome("x", "error", attempt=1)
    assert hand.holding([stale]) == 2
    hand.settle([stale])
    assert len(hand) == 2 and hand.has(claimed("x", 2))
    done = [Outcome("x", "finished", attempt=2), Outcome("y", "finished", attempt=1)]
    assert hand.holding(done) == 0
    hand.settle(done)
    assert len(hand) == 0


def test_a_report_naming_no_attempt_settles_its_job() -> None:
    hand = InHand()
    hand.take([claimed("x", 3)])
    assert hand.holding([Outcome("x", "finished")]) == 0
    hand.settle([Outcome("x", "finished"), Outcome("never-held", "finished", attempt=1)])
    assert len(hand) == 0


def test_only_the_attempt_in_hand_is_passed_over() -> None:
    hand = InHand()
    hand.take([claimed("x", 1)])
    assert hand.has(claimed("x", 1)) and "x" in hand
    assert not hand.has(claimed("x", 2))  # a later attempt, claimed in a lost reply
    assert not hand.has(claimed("y", 1)) and "y" not in hand


def test_only_a_report_sent_again_names_its_attempt() -> None:
    hand = InHand()
    hand.take([claimed("x", 2)])
    first = [Outcome("x", "finished", attempt=2)]
    assert hand.checked(first) == [0]
    hand.unsure(first)  # its cycle's reply never came
    assert hand.checked(first) == [2]
    hand.settle(first)
    assert hand.checked(first) == [0]


def test_two_runs_of_one_id_are_in_hand_apart() -> None:
    """A job deleted while it runs and the job created again under its id, on
    one actor as the same attempt: each run's report settles its own run."""
    hand = InHand()
    hand.take([claimed("x", 1, run="r1"), claimed("x", 1, run="r2")])
    assert len(hand) == 2 and hand.has(claimed("x", 1, run="r2"))
    first = Outcome("x", "stopped", attempt=1, run="r1", entry="1-0")
    assert hand.holding([first]) == 1
    hand.settle([first])
    assert hand.has(claimed("x", 1, run="r2")) and not hand.has(claimed("x", 1, run="r1"))
    assert "x" in hand and len(hand) == 1
    hand.settle([Outcome("x", "finished", attempt=1, run="r2", entry="2-0")])
    assert len(hand) == 0


def test_a_report_without_a_token_settles_no_run_with_one() -> None:
    """A run of a library before tokens and a run with one, of one id and attempt."""
    hand = InHand()
    hand.take([claimed("x", 1), claimed("x", 1, run="r2")])
    old = Outcome("x", "finished", attempt=1)
    assert hand.holding([old]) == 1
    hand.settle([old])
    assert hand.has(claimed("x", 1, run="r2")) and not hand.has(claimed("x", 1))
