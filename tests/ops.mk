# tests/ops.mk - (to be written)
