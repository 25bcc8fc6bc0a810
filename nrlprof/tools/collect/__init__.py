"""Collecting one job's files from every node of a running Ray cluster: listed on each node, pulled, checked."""
