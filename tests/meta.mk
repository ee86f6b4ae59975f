# tests/meta.mk - (to be written)
