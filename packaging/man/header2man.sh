#!/bin/sh
# header2man.sh LAYERFS_H README VERSION: prints liblayerfs(3), made from the public header
# (its top comment, then every type and function with its comment, as the header has
# them) and the README's C example, so that the page cannot drift from either.
set -eu
header=${1:?usage: header2man.sh layerfs.h README.md VERSION}
readme=${2:?usage: header2man.sh layerfs.h README.md VERSION}
version=${3:?usage: header2man.sh layerfs.h README.md VERSION}
here=$(dirname "$0")

# Text for roff: backslashes and minus signs escaped, no line starting with a control character.
escape() {
        sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^[.']/\\\\\\&&/"
}

cat <<EOF
.\\" Made by packaging/man/header2man.sh from layerfs.h and README.md; edit those, not this file.
.TH LIBLAYERFS 3 "" "liblayerfs $version" "LayerFS"
.SH NAME
liblayerfs \\- the C library of LayerFS: Stores, Branches, Sandboxes and Workspaces
.SH SYNOPSIS
.nf
.B #include <layerfs.h>
.PP
.B cc prog.c \$(pkg\\-config \\-\\-cflags \\-\\-libs layerfs)
.fi
.SH DESCRIPTION
EOF
# The header's top comment, as prose.
sed -n '2,/^ \*\/$/{/^\/\*$/d; /^ \*\/$/d; s/^ \* \{0,1\}//; p}' "$header" | sed 's/^$/.PP/' | escape |
        sed 's/^\\&\.PP$/.PP/'
cat <<EOF
.PP
Sandbox calls start a
.BR layerfs-daemon (8)
for each Sandbox and need root. The functions, in the order of the header:
EOF
sh "$here/../api-functions.sh" "$header" | sed 's/$/,/; $s/,$/./' | escape | sed 's/^/.B /'
cat <<EOF
.SH API
The header after its top comment: every type and function with its comment.
.PP
.nf
EOF
# From the end of the top comment, without the preprocessor lines, the C++ guard and the
# LFS_PUBLIC marks.
sed -n '/^ \*\/$/,$p' "$header" | sed -e '1d' -e '/^#/d' -e '/^extern "C" {$/d' -e '/^}$/d' -e 's/^LFS_PUBLIC //' | cat -s |
        escape
cat <<EOF
.fi
.SH ENVIRONMENT
LAYERFS_HOME names the home when a call is given none; LAYERFS_DAEMON the daemon to start.
The library reads the other variables that
.BR layerfs (1)
lists under ENVIRONMENT.
.SH EXAMPLE
This is the README's example; build it with the command of SYNOPSIS.
.PP
.nf
EOF
# The README's first C block.
awk '/^```c$/ { inside = 1; next } inside && /^```$/ { exit } inside' "$readme" | escape
cat <<EOF
.fi
.SH "SEE ALSO"
.BR layerfs (1),
.BR layerfs\\-daemon (8)
EOF
