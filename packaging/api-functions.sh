#!/bin/sh
# Prints the functions that layerfs.h declares, one per line: what the shared library
# exports (LFS_PUBLIC; tests/packaging/test_exports.sh), what liblayerfs(3) lists and
# what tests/packaging/every_call.c must call.
# A declaration starts at column 0 with LFS_PUBLIC and its type, e.g. "LFS_PUBLIC int
# lfs_home_open(" or "LFS_PUBLIC const char *lfs_code_name("; typedefs of function
# pointers are not functions.
set -eu
sed -n '/^typedef/d; s/^LFS_PUBLIC //; s/^[a-z][^(]*[ *]\(lfs_[a-z0-9_]*\)(.*/\1/p' "${1:?usage: api-functions.sh layerfs.h}"
