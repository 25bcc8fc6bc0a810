"""Helpers shared by the test modules: stand-in tools, Ray clusters, traces and the other files tests write.

Test modules import from here, never from one another.
"""
