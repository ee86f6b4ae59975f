# tests/gpu.mk - (to be written)
