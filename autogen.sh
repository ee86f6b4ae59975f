#!/bin/sh
# SPDX-License-Identifier: MIT
# Regenerates the build system from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
# Stanzas automake must see literally, generated from a list (the result
# is committed too, for autoreconf run alone, as dh_autoreconf does).
sh tests/gen-fake-plugins.sh tests/fake-plugins.list > tests/fake-plugins.mk
autoreconf --force --install --verbose
