# plugins/hip/local.mk - (to be written)
