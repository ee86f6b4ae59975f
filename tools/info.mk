# tools/info.mk - loom-info (to be written)
