/* libcore/env.c - placeholder until written. */
