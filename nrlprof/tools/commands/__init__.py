"""One module per `nrlprof` subcommand: its arguments (`add_arguments`) and what it prints (`run`)."""
