/* libcore/meta.c - placeholder until written. */
