# tests/loader.mk - (to be written)
