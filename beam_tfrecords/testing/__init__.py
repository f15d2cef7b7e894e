"""What the tests and benchmarks use to run builds the way clusters do."""
