/* libcore/tensor.c - placeholder until written. */
