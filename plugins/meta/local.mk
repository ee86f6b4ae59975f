# plugins/meta/local.mk - (to be written)
