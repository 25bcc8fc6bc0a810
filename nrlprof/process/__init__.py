"""What every part of nrlprof needs to know about this process, and nothing else: what kind of process it is
(`kind`), the session it runs (`state`), the named and reversible patches (`patches`), the hooks run
when a module is imported (`import_hooks`), and the thread that finishes a window's files beside the next step
(`finishing`). It imports nothing of nrlprof but the variables' names and the leaves (`layout`, `log`)."""
