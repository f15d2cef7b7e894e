"""Reproduces element loss at GroupByKey in Beam 2.77's FnApiRunner with
--direct_running_mode=multi_threading (why beam-tfrecords refuses it).

    python benchmarks/beam_multithreading_gbk.py --direct_num_workers=2 \\
        --direct_running_mode=multi_threading
    # before 1000000 / after 979837 .. 995939 (varies from run to run)
    python benchmarks/beam_multithreading_gbk.py --direct_num_workers=2 \\
        --direct_running_mode=multi_processing
    # before 1000000 / after 1000000

Plain Beam, nothing from this package: 50 elements, a Reshuffle, each
expanded to 20,000 (key, value) pairs, then a count before and after a
GroupByKey.
"""
import sys, apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
opts = PipelineOptions(sys.argv[1:])
def expand(i):
  for j in range(20000):
    yield (i * 20000 + j) % 100000, (b"x" * 30, j)
with beam.Pipeline(runner=FnApiRunner(), options=opts) as p:
  kv = p | beam.Create(list(range(50))) | beam.Reshuffle() | beam.FlatMap(expand)
  _ = kv | "c1" >> beam.combiners.Count.Globally() | "p1" >> beam.Map(lambda n: print("before", n))
  _ = (kv | beam.GroupByKey() | beam.Map(lambda kv: sum(1 for _ in kv[1]))
       | "s" >> beam.CombineGlobally(sum) | "p2" >> beam.Map(lambda n: print("after", n)))
