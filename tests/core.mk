# tests/core.mk - (to be written)
