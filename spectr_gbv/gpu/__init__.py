"""gpu layer."""
