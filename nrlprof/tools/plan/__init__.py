"""Planning: what the current variables or config would profile, where the files go, and which live actors match."""
