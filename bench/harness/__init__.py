"""zinc's benchmark harness (bench/run): zinc vs llama.cpp, microbenchmarks, server scenarios,
load sweep and shared-prefix workload. One module a concern; bench/run is the entry point."""
