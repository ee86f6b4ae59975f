/* libcore/graph.c - placeholder until written. */
