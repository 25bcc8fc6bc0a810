"""Helpers shared by test modules (one module per topic)."""
