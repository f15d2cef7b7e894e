"""Publishing a build's output: the lock, the staging folder, the
journaled switch into the output, the pipeline's last step, and recovering
what a killed build left."""
