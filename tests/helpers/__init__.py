"""Helpers shared by test modules, one module per topic (test modules never import each other)."""
