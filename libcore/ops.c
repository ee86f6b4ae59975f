/* libcore/ops.c - placeholder until written. */
