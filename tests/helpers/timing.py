"""What a test of a wait may allow for when it measures the wait with its own clock."""

# The wait and the test read time.monotonic() at different moments, and Ray's own waits count whole milliseconds: a
# wait that lasts to its deadline can measure a little under it.
CLOCK_SLACK_S = 0.01
