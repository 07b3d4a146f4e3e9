"""Embedded data files (the default instance)."""
