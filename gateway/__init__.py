"""hero-gateway: a JSON-RPC 2.0 job gateway speaking the Hero job protocol on Redis."""

__version__ = "0.1.0"
