"""The job's Ray actors as nrlprof sees them: who each is and which framework it belongs to (`identity`,
`frameworks`), which backends profile it (`matching`), the matched actors this process created (`tracker`) and
the live actors of a cluster (`live`)."""
