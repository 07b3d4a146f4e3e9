"""reference layer."""
