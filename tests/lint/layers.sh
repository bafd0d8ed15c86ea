#!/usr/bin/env bash
# layers.sh [ROOT]: every `#include "..."` of the C sources goes to the file's own layer
# or one below it (docs/architecture.md). Fails naming each include that goes up. The
# Makefile compiles each folder with only those include paths (BASE_INC, STORE_INC...),
# so such an include fails to compile too; this says why, by name.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"

# Each folder and what it may include: its own folder and the layers below. "config" is
# the build's config.h, "gen" watcher_obj.gen.h, the BPF program as
# data (both made in the build directory).
declare -A may=(
        [include]="include"
        [userspace-lib/base]="include userspace-lib/base"
        [userspace-lib/store]="include userspace-lib/base userspace-lib/store"
        [cgroup]="include userspace-lib/base cgroup"
        [bpf]="include userspace-lib/base cgroup bpf gen"
        [backends]="include userspace-lib/base cgroup bpf backends"
        [backends/linux]="include userspace-lib/base cgroup bpf backends backends/linux"
        [proto]="include userspace-lib/base proto config"
        [userspace-lib/client]="include userspace-lib/base userspace-lib/store cgroup backends proto userspace-lib/client config"
        [fuse]="include userspace-lib/base cgroup backends fuse"
        [daemon]="include userspace-lib/base userspace-lib/store cgroup bpf backends proto userspace-lib/client fuse daemon config"
        [bench]="include userspace-lib/base cgroup backends fuse bench"
        [cli]="include userspace-lib/base cli config"
        [init]="include userspace-lib/base cgroup backends init"
)
folders="include userspace-lib/base userspace-lib/store cgroup bpf backends backends/linux proto userspace-lib/client fuse daemon cli init bench"

# Which folder holds a header of that name. A name with a folder in it ("linux/x.h")
# would reach a folder through another's include path (-Ibackends finds
# backends/linux/x.h): no layer has it.
home_of() {
        case $1 in
        config.h) echo config; return ;;
        watcher_obj.gen.h) echo gen; return ;;
        */*) echo "?"; return ;;
        esac
        for f in $folders; do
                [ -f "$f/$1" ] && { echo "$f"; return; }
        done
        echo "?"
}

bad=0
for folder in $folders; do
        for file in "$folder"/*.[ch]; do
                [ -f "$file" ] || continue
                [ "$file" = bpf/watcher.bpf.c ] && continue # the BPF program: its own build
                while IFS=: read -r line header; do
                        from=$(home_of "$header")
                        if [ "$from" = "?" ]; then
                                echo "$file:$line: includes \"$header\", which no layer has (include a header by its name alone, from a layer at or below this one)" >&2
                                bad=1
                        elif [[ " ${may[$folder]} " != *" $from "* ]]; then
                                echo "$file:$line: includes \"$header\" of $from/, a layer above $folder/ (it may include: ${may[$folder]})" >&2
                                bad=1
                        fi
                done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
                                 sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
        done
done
[ "$bad" = 0 ] || { echo "layers.sh: includes go up a layer (docs/architecture.md, 'Layers')" >&2; exit 1; }
echo "layers.sh: every include goes to its own layer or one below"
