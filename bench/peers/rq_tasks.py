"""RQ's task, in a module of its own: RQ's work horse imports it after the fork,
so it must not drag in the bench driver."""


def noop(payload):  # type: ignore[no-untyped-def]
    return payload
