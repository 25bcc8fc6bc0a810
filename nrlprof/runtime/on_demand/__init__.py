"""Windows asked for while an armed job runs (NRL_PROFILE_ON_DEMAND, `nrlprof capture`): the controller's listener
on Ray's KV store (`listener`), the workers it can reach (`workers`), and a worker's backend set up when a window
asked for selects it (`worker`)."""
