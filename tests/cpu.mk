# tests/cpu.mk - (to be written)
