/* libcore/log.c - placeholder until written. */
