/* libcore/buffer.c - placeholder until written. */
