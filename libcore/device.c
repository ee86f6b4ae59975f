/* libcore/device.c - placeholder until written. */
