"""Where a controller's steps come from: the sources and which wins (`sources`), NRL_STEP_METHOD's marker
(`marker`), the method calls a controller submits (`call_hook`) and the profiled workers it calls but did not
create (`adoption`)."""
