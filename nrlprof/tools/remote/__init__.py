"""Reading a job's files where they live: Ray tasks pinned to the nodes that hold them; only figures move."""
