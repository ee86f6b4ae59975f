# plugins/cuda/local.mk - (to be written)
