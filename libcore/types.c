/* libcore/types.c - placeholder until written. */
