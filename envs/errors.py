"""Errors raised by env construction."""


class UnknownEnvError(ValueError):
    """The env id names no environment of its backend."""
