"""The peers: other Redis job queues running the same workloads (see base.py)."""
