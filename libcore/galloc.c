/* libcore/galloc.c - placeholder until written. */
