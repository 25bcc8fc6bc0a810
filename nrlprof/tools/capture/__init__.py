"""`nrlprof capture`'s side of the windows asked for while an armed job runs: the armed jobs of a cluster, read from
Ray's KV store, the request written there and the job's answers waited for (`client`)."""
