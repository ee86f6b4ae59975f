/* libcore/backend.c - placeholder until written. */
