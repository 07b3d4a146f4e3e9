"""Serving engines' own verification code, validated in place (see ``bench/engines/README.md``)."""
