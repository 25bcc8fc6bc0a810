"""Post-run tools: find, collect, merge, summarise and report the profiles nrlprof wrote (ARCHITECTURE.md)."""
