# plugins/cpu/local.mk - (to be written)
