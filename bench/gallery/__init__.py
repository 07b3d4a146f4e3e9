"""Thin wrappers of third-party speculative-decoding verifiers for ``spectr-gbv validate`` (see README.md)."""
