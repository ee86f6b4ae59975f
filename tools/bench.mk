# tools/bench.mk - loom-bench (to be written)
