/* libcore/registry.c - placeholder until written. */
