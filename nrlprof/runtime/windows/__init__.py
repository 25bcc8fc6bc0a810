"""Windows opened and closed: the gate, the driver's step state machine (`gate`), window actions sent to the
tracked actors (`dispatch`), the backends of one process and the actions they take (`profiler`), a worker found
dead in a window (`deaths`) and a window that opens in no worker (`unmatched`)."""
