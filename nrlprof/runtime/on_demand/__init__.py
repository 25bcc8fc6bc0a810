"""Windows asked for while an armed job runs (NRL_PROFILE_ON_DEMAND, `nrlprof capture`): the controller's listener
on Ray's KV store (`listener`) and the workers it can reach (`workers`); a worker's backend is set up when a window
asked for selects it by nrlprof.runtime.activation (`enable_in_actor`)."""
