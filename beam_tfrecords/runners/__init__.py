"""Beam runners: the pipeline options checked (`pipeline_options`), a
build's pipeline run to its end (`run`), and what some runners lack and
how every build works around it (`gaps`)."""
