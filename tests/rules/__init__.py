"""Tests of the rule catalogue (a package, so its conftest does not shadow tests/conftest.py)."""
