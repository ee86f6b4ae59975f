# examples/local.mk - (to be written)
