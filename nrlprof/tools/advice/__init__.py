"""`nrlprof explain`'s reasoning: the RL phase of each method (`phases`), each step's critical path by phase and the
busy time of each phase and worker group (`step_facts`), the rules that turn figures into findings (`rules_*`),
and the explanation they make (`explain`). Offline: it reads a summary and its step anatomy, never Ray."""
