/* libcore/status.c - placeholder until written. */
