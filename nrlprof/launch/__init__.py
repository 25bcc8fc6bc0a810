"""How a matched worker is launched: the runtime_env fragment it is created with (the profiling tool wrapping
its interpreter, the plan, who it is, Ray's worker set-up hook), read back in the worker (`runtime_env`)."""
