"""Nsight Systems' options: built from the plan and checked (`options`), and the options an installed nsys knows,
read from `nsys profile --help` (`known`)."""
