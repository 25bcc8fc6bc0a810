"""Windows that open themselves when a step is slow (NRL_<backend>_STEP_RANGE=slow, slow:keep): the verdict on each
step and the spacing between triggers (`verdict`), the controller's calls timed to find the slowest rank and
stragglers (`calls`), and what the gate does at each step boundary of an armed job (`watch`)."""
