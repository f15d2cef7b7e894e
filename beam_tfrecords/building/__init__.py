"""Building: the options, the plan made on the launcher, the pipeline
`btr.build` runs, the public PTransforms, scheduled builds."""
