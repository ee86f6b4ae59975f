/* libcore/loader.c - placeholder until written. */
