"""The processes a matched worker starts: how they join its windows (`join`, and the start-up shim in `site/`),
the worker's channel to them and what is said over it (`channel`, `protocol`), their names (`names`), a child
ended by its worker (`ending`), and inference engines' own profilers in their place (`engine_profilers`,
`engine_switches`)."""
