"""Mutation testing of nrlprof's core modules (test code, not shipped)."""
