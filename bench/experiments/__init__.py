"""Finished experiments kept outside the package: research variants that no registered method uses."""
