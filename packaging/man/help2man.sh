#!/bin/sh
# help2man.sh PROGRAM SECTION: prints the man page of PROGRAM (layerfs or layerfs-daemon),
# made from its own --help, so that the page and --help cannot drift apart. For layerfs,
# the COMMANDS section holds each command that --help lists, with that command's own
# --help text.
#
# The layout it reads (cli/main.c and daemon/main.c keep it): a section name alone on a
# line in capitals; entries indented by four spaces. SYNOPSIS and EXAMPLES are kept line
# by line; GLOBAL OPTIONS, OPTIONS, ENVIRONMENT and FILES are "TERM  description" lists (a longer
# description continues on lines indented further); other sections are prose.
set -eu
prog=${1:?usage: help2man.sh PROGRAM SECTION}
section=${2:?usage: help2man.sh PROGRAM SECTION}
name=$(basename "$prog")
version=$("$prog" --version)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/help2man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$prog" --help >"$tmp/help"
# Commands are the COMMANDS entries at four spaces ("    GROUP METHOD ..."); their
# summaries' continuation lines are indented further.
sed -n '/^COMMANDS$/,/^$/s/^    \([a-z][a-z]*\) \([a-z_][a-z_]*\).*/\1 \2/p' "$tmp/help" >"$tmp/commands"
{
        sed -n '1,/^COMMANDS$/p' "$tmp/help"
        while read -r group method; do
                echo "@@COMMAND $group $method"
                "$prog" "$group" "$method" --help
        done <"$tmp/commands"
        # What follows the COMMANDS list (all of --help when there is none).
        if [ -s "$tmp/commands" ]; then sed '1,/^COMMANDS$/d' "$tmp/help" | sed '1,/^$/d'; fi
} >"$tmp/all"
if [ ! -s "$tmp/commands" ]; then cp "$tmp/help" "$tmp/all"; fi

awk -v name="$name" -v section="$section" -v version="$version" '
function esc(s) {
        gsub(/\\/, "\\\\e", s)
        gsub(/-/, "\\\\-", s)
        if (s ~ /^[.\047]/)
                s = "\\&" s
        return s
}
function strip(s) {
        sub(/^ +/, "", s)
        return s
}
# Ends what is open: a list entry, a block kept line by line.
function flush() {
        if (nofill)
                print ".fi"
        nofill = 0
        para = 0
}
BEGIN {
        print ".\\\" Made by packaging/man/help2man.sh from " name " --help; edit that text, not this file."
        printf ".TH %s %s \"\" \"%s\" \"LayerFS\"\n", toupper(name), section, version
}
/^[A-Z][A-Z ]*$/ {
        flush()
        heading = $0
        incmd = 0
        printf ".SH \"%s\"\n", heading
        if (heading == "SYNOPSIS" || heading == "EXAMPLES") {
                print ".nf"
                nofill = 1
        }
        next
}
/^@@COMMAND / {
        flush()
        incmd = 1
        usage_next = 1
        next
}
incmd {
        if (usage_next) {
                usage_next = 0
                print ".SS " esc($0)
        } else if ($0 == "") {
                para = 1
        } else {
                if (para)
                        print ".PP"
                para = 0
                print esc($0)
        }
        next
}
heading == "NAME" {
        if ($0 != "") {
                line = strip($0)
                sub(/ - /, " \\- ", line)
                print line
        }
        next
}
nofill {
        if ($0 != "")
                print esc(substr($0, 5))
        next
}
heading == "GLOBAL OPTIONS" || heading == "OPTIONS" || heading == "FILES" || heading == "ENVIRONMENT" {
        if ($0 == "")
                next
        if ($0 ~ /^    [^ ]/) {
                line = substr($0, 5)
                term = line
                desc = ""
                if (match(line, /  +/)) {
                        term = substr(line, 1, RSTART - 1)
                        desc = substr(line, RSTART + RLENGTH)
                }
                print ".TP"
                print ".B " esc(term)
                if (desc != "")
                        print esc(desc)
        } else {
                print esc(strip($0))
        }
        next
}
{
        if ($0 == "") {
                para = 1
                next
        }
        if (para)
                print ".PP"
        para = 0
        print esc(strip($0))
}
END {
        flush()
        print ".SH \"SEE ALSO\""
        n = split("layerfs 1 layerfs-daemon 8 liblayerfs 3", pages, " ")
        sep = ""
        for (i = 1; i < n; i += 2) {
                if (pages[i] == name)
                        continue
                printf "%s.BR %s (%s)", sep, pages[i], pages[i + 1]
                sep = ",\n"
        }
        print ""
}
' "$tmp/all"
