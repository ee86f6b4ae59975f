# SPDX-License-Identifier: MIT
# tools/local.mk - the command-line tools.
include tools/info.mk
include tools/bench.mk
include tools/conformance.mk
include tools/run.mk
