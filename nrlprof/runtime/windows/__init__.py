"""Windows opened and closed: the gate, the driver's step state machine (`gate`), window actions sent to the
tracked actors (`dispatch`), the backends of one process (`process`), a worker found dead in a window
(`deaths`) and a window that opens in no worker (`unmatched`)."""
