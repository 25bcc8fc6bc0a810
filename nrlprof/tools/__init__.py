"""Post-run tools: find, merge, summarise and report the profiles nrlprof wrote."""
