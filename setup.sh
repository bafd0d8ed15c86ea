#!/bin/sh
# Sets up a fresh Debian 12 machine for LayerFS and runs the end-to-end demo:
# installs make and a compiler when missing, then `make demo` (which installs the
# Debian packages the build needs, builds everything and runs the demo). Run as root.
set -eu
cd "$(dirname "$0")"
if ! command -v make >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1; then
        if [ "$(id -u)" != 0 ]; then
                echo "setup.sh: make and a C compiler are missing; run as root to install them" >&2
                exit 1
        fi
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq make build-essential >/dev/null
fi
exec make demo
