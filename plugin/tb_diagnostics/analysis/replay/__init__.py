"""Replaying a span's dependency graph: what the steps would take after a change."""
