/* SPDX-License-Identifier: MIT */
/* layerfs: the command line form of the LayerFS API (SPEC 2a). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "error_json.h"
#include "numbers.h"

/* Exit status of a refusal or failure of LayerFS itself (SPEC 2a), as docker run uses. */
#define EXIT_LAYERFS 125

/* --help is main_help_head, the COMMANDS list made from the table below (so that it names
 * every command the CLI accepts), then main_help_tail. The man page layerfs(1) and the bash
 * completion are made from this output (packaging/), so keep its layout: section names
 * alone on a line, entries indented by four spaces. */
static const char main_help_head[] =
        "NAME\n"
        "    layerfs - sandboxes with a versioned filesystem\n"
        "\n"
        "SYNOPSIS\n"
        "    layerfs [--home DIR] [--project NAME] [--json] GROUP METHOD [ARGS...]\n"
        "    layerfs GROUP METHOD --help\n"
        "\n"
        "DESCRIPTION\n"
        "    A home holds projects; each project has a Store of content-addressed objects\n"
        "    with Commits and Branches. A Sandbox (one daemon each) mounts Branches as\n"
        "    read-write Workspaces (FUSE); a Workspace's changes become a Commit with\n"
        "    'workspace commit'. Commands run in a Workspace each in a cgroup of their own;\n"
        "    closing a Sandbox ends every process it started.\n"
        "\n"
        "COMMANDS\n";

static const char main_help_tail[] =
        "\n"
        "GLOBAL OPTIONS\n"
        "    --home DIR       the home (else $LAYERFS_HOME; /var/lib/layerfs for root;\n"
        "                     $XDG_DATA_HOME/layerfs otherwise)\n"
        "    --project NAME   the project (else $LAYERFS_PROJECT; may be left out when the\n"
        "                     home has one project)\n"
        "    --json           print the result as JSON for scripts; errors as\n"
        "                     {\"error\": {\"code\", \"message\"}}. It gives names as they\n"
        "                     are; text output quotes a path or command line that holds\n"
        "                     control characters, as git does (\"a\\nb\", \"\\033]0;x\\a\"),\n"
        "                     so that one line is one entry and nothing drives the terminal\n"
        "    -h, --help       this text; after GROUP METHOD, that command's text\n"
        "    --version        the version\n"
        "\n"
        "ENVIRONMENT\n"
        "    LAYERFS_HOME     the home, when --home is not given\n"
        "    LAYERFS_PROJECT  the project, when --project is not given\n"
        "    LAYERFS_AUTHOR   the author of commits (default user@host)\n"
        "    LAYERFS_NO_URING=1\n"
        "                     plain system calls instead of io_uring\n"
        "    LAYERFS_COMMAND_UID, LAYERFS_COMMAND_GID\n"
        "                     the identity commands run as, and that files from the Store\n"
        "                     appear to belong to in a Workspace (default 501 and 20; each\n"
        "                     from 1 to 4294967294, never root)\n"
        "    LAYERFS_DAEMON   the layerfs-daemon to start (default: the one beside the\n"
        "                     program, else the installed one named in FILES)\n"
        "    LAYERFS_CGROUP_ROOT\n"
        "                     where the Sandboxes' cgroups go (default CGROUP2/layerfs)\n"
        "    LAYERFS_IDLE_SECONDS\n"
        "                     a Sandbox with no Workspace mounted and no request closes\n"
        "                     itself after this many seconds (default 120; from 0.001 to\n"
        "                     120)\n"
        "    LAYERFS_POOL     'sandbox create' keeps this many Sandboxes made ahead for\n"
        "                     creates like it (same options and settings), and takes one\n"
        "                     when there is one (0 to 16; default 0: no pool); a pooled\n"
        "                     Sandbox is not listed, and ends at its idle close\n"
        "    LAYERFS_GC_AFTER_DELETES\n"
        "                     a Sandbox's idle close first runs 'project gc' when its\n"
        "                     project had this many branches deleted since the last gc\n"
        "                     (from 1 to 1000000; default: never); read at sandbox create\n"
        "    LAYERFS_SANDBOX  the home's default runtime: native, namespaces or docker\n"
        "    LAYERFS_RUNTIME  the runtime of a new linux Sandbox: native or namespaces\n"
        "                     (default: LAYERFS_SANDBOX's when it names one, else\n"
        "                     namespaces where this host can make them, else native)\n"
        "    LAYERFS_ID_RANGE FIRST:COUNT, the host ids namespaces Sandboxes take their\n"
        "                     65536 each from (default 1073741824:1073741824)\n"
        "    LAYERFS_PLACEMENT\n"
        "                     host, or the VM route the home's Stores live in (firecracker,\n"
        "                     qemu, lima, mac, wsl)\n"
        "    LAYERFS_WATCHER  how a new Sandbox watches its processes: bpf, proc or cgroup\n"
        "                     (default: bpf where it loads, else cgroup)\n"
        "    LAYERFS_FUSE_TRANSPORT\n"
        "                     the FUSE loop of a new Sandbox's Workspaces: dev (default:\n"
        "                     our own, over /dev/fuse, with passthrough where the kernel\n"
        "                     has it), uring (the same over io_uring rings; needs the\n"
        "                     kernel's enable_uring) or libfuse (libfuse's loop)\n"
        "    LAYERFS_FUSE_URING=off|auto|on\n"
        "                     io_uring rings for our own loop (default off): auto where\n"
        "                     /sys/module/fuse/parameters/enable_uring is on, else the\n"
        "                     dev loop; on lets the daemon turn that switch on\n"
        "    LAYERFS_FUSE_PASSTHROUGH=0|1\n"
        "                     whether the dev loop passes upper files' data between\n"
        "                     the kernel and them (default: on where the kernel can)\n"
        "    LAYERFS_FUSE_DEBUG=1\n"
        "                     log every FUSE request to the Sandbox's log\n"
        "\n"
        "FILES\n"
        "    /var/lib/layerfs         root's default home\n"
        "    HOME/projects/NAME/      a project's Store: store.db (SQLite) and objects/\n"
        "    HOME/home.db             the Sandbox records\n"
        "    HOME/sandboxes/P-N/      Sandbox N of project P: its control socket, daemon.log,\n"
        "                             private tmp/ and the Workspaces under mnt/\n"
        "    " LAYERFS_DAEMON_PATH "\n"
        "                             the daemon started for each Sandbox\n"
        "    CGROUP2/layerfs/         the Sandboxes' cgroups (CGROUP2: the cgroup2 mount;\n"
        "                             LAYERFS_CGROUP_ROOT moves them)\n"
        "\n"
        "EXIT STATUS\n"
        "    0 on success. 125 when LayerFS refuses or fails; stderr then says\n"
        "    'CODE: message' with CODE one of InvalidInput, Unsupported, NoSuchProject,\n"
        "    NoSuchBranch, NoSuchSandbox, NotMounted, AlreadyMounted, LimitReached, Busy,\n"
        "    Dirty, Conflict, PermissionDenied, Failed. Output that cannot be written\n"
        "    (a full disk, a closed stdout) is a failure too: Failed, 125; a Sandbox\n"
        "    whose number could not be printed is closed again.\n"
        "\n"
        "EXAMPLES\n"
        "    layerfs project init web --from ./site\n"
        "    layerfs branch create feature\n"
        "    layerfs branch commit feature --from ./site -m 'new page'\n"
        "    layerfs branch merge feature main\n"
        "    layerfs --json branch diff main feature\n"
        "    n=$(layerfs sandbox create)\n"
        "    layerfs workspace mount $n main\n"
        "    layerfs workspace exec $n main -- make -j2\n"
        "    layerfs workspace commit $n main -m 'build'\n"
        "    layerfs sandbox close $n\n";

typedef struct command {
        const char *group, *method;
        int (*run)(cli_ctx *ctx);
        int min_args, max_args;
        const char *options; /* long options taking a value, ","-separated; "m" is -m */
        const char *help;
        const char *flags; /* options without a value, ","-separated */
        const char *summary; /* one line for --help's list; "\n" continues it below */
} command;

static const command commands[] = {
        { "project", "init", cmd_project_init, 1, 1, "from",
          "layerfs project init NAME [--from DIR]\n\n"
          "Makes project NAME ([a-z0-9][a-z0-9._-]{0,62}) in the home with branch 'main'.\n"
          "With --from, main's first commit holds DIR's regular files (with their executable\n"
          "bit), directories (empty ones too) and symlinks; fifos, sockets, devices and\n"
          "the home itself (if DIR holds it) are skipped. Without it, main starts with an\n"
          "empty commit. A failed or interrupted init leaves no project behind.\n\n"
          "Prints the project, the branch and the commit ({project, branch, commit} with --json).\n",
          NULL, "make a project; branch main holds DIR or nothing" },
        { "project", "list", cmd_project_list, 0, 0, "",
          "layerfs project list\n\nLists the home's projects with their branches and sandboxes.\n", NULL,
          "projects with their branches" },
        { "project", "verify", cmd_project_verify, 0, 0, "",
          "layerfs project verify\n\n"
          "Runs SQLite's integrity check on the project's Store and checks that every commit,\n"
          "tree and file reachable from a branch hashes to its name. Exits 125 with Failed,\n"
          "naming the first damaged object, otherwise prints how many objects were checked.\n",
          NULL, "check the Store: database and every object" },
        { "project", "gc", cmd_project_gc, 0, 0, "repack-below",
          "layerfs project gc [--dry-run] [--repack-below PERCENT]\n\n"
          "Removes from the project's Store the commits, trees and files that no branch\n"
          "reaches (those of deleted branches, and what they alone held), and the leftovers\n"
          "of killed writers. What a mounted Workspace reads stays: its base commits are kept\n"
          "until it is unmounted, even when its branch was deleted. Its uncommitted changes\n"
          "are the Sandbox's, never the Store's, and gc does not touch them. Small files live\n"
          "in packs: a pack with nothing live is removed, and one whose live files hold less\n"
          "than PERCENT of its bytes (1 to 100, default 50) is rewritten: those files are\n"
          "copied into a new pack and the old one removed. Commits, merges and mounts of the\n"
          "project wait while gc runs, and gc waits for those already running; a gc that is\n"
          "killed loses nothing reachable ('layerfs project verify' checks it), and the next\n"
          "one finishes its work.\n\n"
          "Prints what it removed and the bytes freed on disk, with each pack removed or\n"
          "rewritten (--json: {project, dry_run, commits, trees, database_bytes,\n"
          "packed_blobs, loose_objects, leftovers, stale_pins, pins, bytes, repack_below,\n"
          "vacuumed, packs: [{pack, size, live, action}]}). --dry-run changes nothing and\n"
          "says what would go.\n",
          "dry-run", "remove what no branch reaches; --dry-run: tell" },
        { "branch", "create", cmd_branch_create, 1, 1, "from",
          "layerfs branch create NAME [--from BRANCH|COMMIT]\n\n"
          "Makes branch NAME at the head of BRANCH or at COMMIT (a commit id or a unique\n"
          "prefix of at least 4 hex digits); default: main. Names are letters, digits, '.',\n"
          "'_', '-' with '/' between parts.\n",
          NULL, "a new branch at a branch or a commit (default: main)" },
        { "branch", "list", cmd_branch_list, 0, 0, "",
          "layerfs branch list\n\nLists branches with their head commits.\n", NULL,
          "branches and their commits" },
        { "branch", "delete", cmd_branch_delete, 1, 1, "",
          "layerfs branch delete NAME [--force]\n\n"
          "Removes the branch and prints the commit it was at ({branch, deleted, commit} with\n"
          "--json). Its commits stay in the Store: 'layerfs branch create NAME --from COMMIT'\n"
          "makes it again. Refused with Busy, naming each Sandbox and its Workspace's path,\n"
          "while a running Sandbox has the branch mounted; unmount it there first. main is\n"
          "refused with InvalidInput. --force deletes either anyway: a Workspace left on the\n"
          "deleted branch keeps its changes, and its commit is refused with NoSuchBranch until\n"
          "the branch is made again.\n",
          "force", "remove a branch (its commits stay)" },
        { "branch", "log", cmd_branch_log, 1, 1, "limit",
          "layerfs branch log NAME [--limit N]\n\n"
          "Commits of NAME (a branch or commit), newest first, following first parents.\n",
          NULL, "commits, newest first" },
        { "branch", "diff", cmd_branch_diff, 2, 2, "",
          "layerfs branch diff A B\n\n"
          "Paths that differ from A to B (branches or commits), one per line as\n"
          "'A path', 'M path' or 'D path' (added, modified, deleted). Files, symlinks and\n"
          "empty directories are listed; a mode change is a modification.\n",
          NULL, "paths changed from A to B" },
        { "branch", "merge", cmd_branch_merge, 2, 2, "",
          "layerfs branch merge FROM INTO\n\n"
          "Merges FROM (a branch or commit) into branch INTO, three-way per path against\n"
          "their nearest common ancestor. When INTO is an ancestor of FROM the head just\n"
          "moves (fast-forward). A path changed on one side only takes that side's version\n"
          "(a deletion too); a file's executable bit and its contents merge on their own, as\n"
          "git does. A file's contents changed on both sides differently, a path changed on\n"
          "one side and deleted on the other, or a file on one side and a directory on the\n"
          "other, is a conflict: Conflict lists every such path and nothing changes. Renames\n"
          "are not detected: a rename is a deletion and an addition.\n",
          NULL, "three-way merge; Conflict lists every path" },
        { "branch", "export", cmd_branch_export, 2, 2, "",
          "layerfs branch export BRANCH|COMMIT DIR\n\n"
          "Writes the commit's files into DIR, which must not exist or be empty. Files are\n"
          "checked against their ids while being written; the result appears whole or not\n"
          "at all: it is built beside DIR as .NAME.layerfs-export-PID, removed on a failure\n"
          "or SIGINT/SIGTERM/SIGHUP, and by the next export into DIR after a SIGKILL.\n",
          NULL, "write a commit's files into a new or empty DIR" },
        { "branch", "commit", cmd_branch_commit, 1, 1, "from,m",
          "layerfs branch commit BRANCH --from DIR -m MESSAGE\n\n"
          "Records DIR as the next commit of BRANCH: DIR's contents replace the branch's\n"
          "tree (the home, if DIR holds it, is left out). Only files whose contents the\n"
          "Store lacks are written. When nothing differs no commit is made and the head\n"
          "is printed unchanged.\n",
          NULL, "record DIR as the branch's next commit" },
        { "project", "list_sandboxes", cmd_project_list_sandboxes, 0, 0, "page-size,page",
          "layerfs project list_sandboxes [--page-size N] [--page K]\n\n"
          "Every running Sandbox of the home (all projects and platforms): number, project,\n"
          "platform, how many Workspaces it has mounted, its limits (--json: limits\n"
          "{memory, pids, cpus, disk}, in bytes, null for none) and its network (--json:\n"
          "network {mode, host_link, host_address, sandbox_address, prefix}, the last four\n"
          "null but for private). With --page-size, only page\n"
          "K (from 1, default 1) of N Sandboxes; past the end, none.\n",
          NULL, "running Sandboxes of every project" },
        { "sandbox", "create", cmd_sandbox_create, 0, 0, "image,platform,memory,pids,cpus,disk,network",
          "layerfs sandbox create [--image TEXT] [--platform NAME] [--memory SIZE] [--pids N] [--cpus X] [--disk SIZE]\n"
          "                       [--network none|host|private]\n\n"
          "Starts a Sandbox for the project and prints its number, the smallest free one\n"
          "({sandbox, image, platform, network} with --json). Its daemon serves the Sandbox's\n"
          "Workspaces and commands until 'layerfs sandbox close' or its idle close.\n\n"
          "PLATFORM is one of linux, docker, podman, firecracker, qemu, lima, mac, wsl;\n"
          "without --platform, the home's default (LAYERFS_SANDBOX: native or namespaces\n"
          "mean linux, docker means docker). A home allows the platforms of its placement\n"
          "(LAYERFS_PLACEMENT): host allows linux, docker, podman; a VM route allows itself,\n"
          "docker, podman. Refused before anything is made: any other name (windows,\n"
          "native, a typo, another case) is InvalidInput; a platform the home does not allow,\n"
          "or one that is not ready here (see 'layerfs runtime status'), is Unsupported.\n"
          "This build drives linux (as root); --image is ignored for it. A linux Sandbox\n"
          "runs in namespaces of its own (user, pid, mount, ipc, uts, cgroup, net) as host\n"
          "ids of its own where this host can make them, else on the native runtime\n"
          "('layerfs runtime status' says which and why; LAYERFS_RUNTIME chooses).\n\n"
          "Limits (none by default); the first three are set on the Sandbox's cgroup before\n"
          "its daemon starts, so that its daemon and every command count together:\n"
          "  --memory SIZE  memory.max: bytes, or a number with K, M, G or T (64M at least)\n"
          "  --pids N       pids.max: processes and threads (64 to 4194304)\n"
          "  --cpus X       cpu.max: CPUs' worth of time (0.01 to this host's CPUs; 1.5 is\n"
          "                 150 ms of each 100 ms)\n"
          "  --disk SIZE    the Workspaces' uncommitted data and TMPDIR together, on a tmpfs\n"
          "                 of that size (1M at least): a write past it fails with ENOSPC\n"
          "A value not of its form is InvalidInput; --memory, --pids or --cpus where the\n"
          "host's cgroup v2 does not offer LayerFS the controller (memory, pids, cpu; see\n"
          "'layerfs runtime status', cgroup:NAME) is Unsupported; both before anything is\n"
          "made. 'layerfs project list_sandboxes' shows each Sandbox's limits.\n\n"
          "Network (namespaces runtime; default none):\n"
          "  none     a net namespace of its own with only lo, up: nothing of the host's\n"
          "           network or another Sandbox's is reachable, 127.0.0.1 is its own\n"
          "  host     the host's network: its links, addresses and ports, 127.0.0.1 too\n"
          "  private  lo and eth0, one end of a veth pair whose other end (lfs + 12 hex\n"
          "           digits of the Sandbox's instance) is on the host: a /30 of the home's\n"
          "           LAYERFS_NET_RANGE (default 169.254.64.0/18), the host's end its first\n"
          "           address, eth0 its second with the default route through the host's.\n"
          "           The host and its services on that address (or on every address)\n"
          "           are reachable, nothing beyond: the host's end forwards nothing\n"
          "           (whatever ip_forward says) until the operator turns it on\n"
          "The native runtime's commands are processes of the host: it gives only host\n"
          "(its default); none or private there is Unsupported. Another name is\n"
          "InvalidInput; no free /30 left is LimitReached; all before anything is made.\n"
          "'layerfs project list_sandboxes' shows each Sandbox's network.\n",
          NULL,
          "a new Sandbox; prints its number (platforms: linux,\ndocker, podman, firecracker, qemu, lima, mac, wsl)" },
        { "sandbox", "close", cmd_sandbox_close, 1, 1, "",
          "layerfs sandbox close N [--force]\n\n"
          "Unmounts every Workspace of Sandbox N, ends its daemon and removes its directory and\n"
          "record. A Workspace with uncommitted changes is refused with Dirty unless --force.\n",
          "force", "unmount all, end the daemon, remove it all" },
        { "sandbox", "list_workspaces", cmd_sandbox_list_workspaces, 1, 1, "",
          "layerfs sandbox list_workspaces N\n\nThe Workspaces of Sandbox N: branch, clean or dirty, path.\n",
          NULL, "mounted branches, clean or dirty" },
        { "sandbox", "log", cmd_sandbox_log, 1, 1, "lines",
          "layerfs sandbox log N [--lines K]\n\n"
          "The last K lines (default 100) of Sandbox N's daemon log: mounts, commits, errors.\n"
          "It stays readable after the daemon died. The log is bounded: past 1 MiB it moves\n"
          "to daemon.log.1 and a new one starts.\n",
          NULL, "the tail of the Sandbox daemon's log" },
        { "sandbox", "events", cmd_sandbox_events, 1, 1, "",
          "layerfs sandbox events N [--follow]\n\n"
          "Process starts and ends in sandbox N, one JSON object per line, oldest first:\n"
          "{\"event\": \"start\"|\"exit\", \"pid\", \"ppid\", \"cgroup\" (the command's leaf),\n"
          "\"comm\", \"time\" (seconds since the epoch), \"received\" (when the daemon learnt of\n"
          "it), and for an exit \"exit\" (its code) or \"signal\"}.\n\n"
          "With the BPF watcher every process of the Sandbox is reported, also those that\n"
          "detached (a multithreaded process once, when its last thread ends); the proc\n"
          "connector watcher (LAYERFS_WATCHER=proc) reports the same; the cgroup watcher\n"
          "(LAYERFS_WATCHER=cgroup, or no BPF) only the commands the Sandbox started.\n"
          "The daemon keeps the last 4,096. With --follow, each new event is printed as it happens, until\n"
          "the Sandbox closes or the reader goes away.\n",
          "follow", "process starts and exits, as JSON lines" },
        { "workspace", "mount", cmd_workspace_mount, 2, 2, "",
          "layerfs workspace mount N BRANCH\n\n"
          "Mounts BRANCH read-write in Sandbox N and prints the path. Reads show the branch as\n"
          "of the mount; writes stay in the Workspace until 'layerfs workspace commit'.\n",
          NULL, "mount BRANCH read-write; prints the path" },
        { "workspace", "status", cmd_workspace_status, 2, 2, "",
          "layerfs workspace status N BRANCH\n\n"
          "Paths changed in the Workspace against its base commit ('A path', 'M path',\n"
          "'D path').\n",
          NULL, "changed paths against the mount's base" },
        { "workspace", "commit", cmd_workspace_commit, 2, 2, "m",
          "layerfs workspace commit N BRANCH -m MESSAGE\n\n"
          "Records the Workspace's changes as a new commit on BRANCH. When the branch moved\n"
          "since the mount, merges three-way; a conflict changes nothing and the Workspace\n"
          "keeps its changes. Afterwards the Workspace's base is the new commit. With no\n"
          "changes nothing is recorded ('nothing changed'). Prints the commit ({commit,\n"
          "merged, changed} with --json).\n",
          NULL, "record the changes (merging if needed)" },
        { "workspace", "unmount", cmd_workspace_unmount, 2, 2, "",
          "layerfs workspace unmount N BRANCH [--discard]\n\n"
          "Unmounts the Workspace. Refused with Busy while a process has its cwd or a file\n"
          "open in it, and with Dirty when it has uncommitted changes, unless --discard.\n",
          "discard", "refused Busy while in use, Dirty if changed" },
        { "workspace", "exec", cmd_workspace_exec, 3, 1 << 20, "cwd,env,timeout",
          "layerfs workspace exec N BRANCH [--cwd DIR] [--env K=V]... [--timeout SECONDS] [--tty] -- COMMAND [ARG...]\n\n"
          "Runs COMMAND in the Workspace of BRANCH in sandbox N, in a cgroup of its own, as the\n"
          "command identity (uid 501, gid 20, no supplementary groups; LAYERFS_COMMAND_UID and\n"
          "_GID change it). COMMAND is looked up in PATH unless it has a '/'. It starts in the\n"
          "Workspace, or in DIR below it (relative to the Workspace, or an absolute path inside\n"
          "it). Its environment is PATH, HOME and TMPDIR (the Sandbox's private tmp), plus\n"
          "each --env K=V. stdin is passed to it as it is, unless it is a terminal: a command\n"
          "never receives your terminal, so what you type is copied to it through a pipe\n"
          "while it runs (and nothing it leaves behind reads your terminal afterwards).\n"
          "stdout and stderr stream while it runs, of any size. There is no timeout unless\n"
          "--timeout (seconds, from 0 to 1000000000; 0: none): then, when it expires, the\n"
          "command and everything it started are killed (its whole cgroup).\n\n"
          "--tty gives COMMAND a pseudo-terminal of its own, as its controlling terminal (for\n"
          "shells, editors, anything that asks 'test -t'), with your TERM: its stdout and\n"
          "stderr both come out on stdout. Your terminal is in raw mode meanwhile (keys such\n"
          "as ^C and ^Z go to COMMAND) and is restored however the exec ends; COMMAND's window\n"
          "size follows yours. A job in the background that reads your terminal is stopped,\n"
          "as for any program: give it '</dev/null'.\n\n"
          "Processes it leaves in the background (nohup, setsid, a double fork) keep running\n"
          "until the Sandbox closes; what they write after the command ended is not shown.\n\n"
          "Exit status: the command's own; 124 its --timeout expired, 126 it could not be run,\n"
          "127 it was not found, 128+N it was killed by signal N; 125 LayerFS refused or failed\n"
          "(stderr says 'CODE: message'). With --json, {sandbox, branch, exit} is printed after\n"
          "the command's output.\n\n"
          "Examples: layerfs workspace exec 1 main --cwd src -- make -j2\n"
          "          layerfs workspace exec 1 main --tty -- bash\n",
          "tty", "run COMMAND in the Workspace, in its own cgroup;\n--tty: on a terminal of its own" },
        { "process", "start", cmd_process_start, 3, 1 << 20, "cwd,env",
          "layerfs process start N BRANCH [--cwd DIR] [--env K=V]... -- COMMAND [ARG...]\n\n"
          "Starts COMMAND in the background in the Workspace of BRANCH in sandbox N, in a cgroup\n"
          "of its own, as the command identity, with the environment and --cwd of 'workspace\n"
          "exec'. Its stdin is /dev/null; its stdout and stderr go to a log in the Sandbox's\n"
          "directory. It runs until it ends, 'process kill' ends it, or the Sandbox closes; a\n"
          "Workspace it holds refuses unmount with Busy. Prints its pid ({sandbox, pid, log}\n"
          "with --json).\n",
          NULL, "run COMMAND in the background; prints its pid" },
        { "process", "list", cmd_process_list, 1, 1, "",
          "layerfs process list N\n\n"
          "Every process living in sandbox N's command cgroups, also those that detached (setsid,\n"
          "double fork): pid, cgroup leaf, 'running', command line. Then the processes started\n"
          "with 'process start' that have ended, with 'exited' and their exit status.\n",
          NULL, "the Sandbox's processes, also detached ones" },
        { "process", "kill", cmd_process_kill, 2, 2, "",
          "layerfs process kill N PID\n\n"
          "Ends process PID of sandbox N with SIGKILL. A PID that is not a process of the Sandbox\n"
          "is refused with InvalidInput and nothing is signalled.\n",
          NULL, "end one of them" },
        { "runtime", "status", cmd_runtime_status, 0, 0, "",
          "layerfs runtime status\n\n"
          "What this host offers the runtime: the home, its placement, the default runtime\n"
          "(LAYERFS_SANDBOX), the watcher a new Sandbox would use (bpf or cgroup), and each\n"
          "kernel feature the project uses, found by trying it (kernel:cgroup2,\n"
          "kernel:cgroup.kill, kernel:clone-into-cgroup, kernel:pidfd, kernel:bpf,\n"
          "kernel:bpf-ringbuf, kernel:btf, kernel:fuse, kernel:fuse-passthrough,\n"
          "kernel:fuse-io-uring, kernel:io_uring, kernel:proc-connector, and the user, pid,\n"
          "mount and net namespaces); 'missing' lists those it lacks. kconfig-notes/ in the\n"
          "source says what each needs and what degrades without it. As root it makes\n"
          "LayerFS's cgroup root if missing (two probes use it).\n",
          NULL, "what the kernel offers; which watcher runs" },
        { "runtime", "reclaim", cmd_runtime_reclaim, 0, 0, "",
          "layerfs runtime reclaim\n\n"
          "Cleans up after every Sandbox of the home whose daemon is gone (killed, crashed, or\n"
          "from before a reboot): ends every process left in its cgroup however it detached,\n"
          "detaches its mounts (also those that answer ENOTCONN), removes its cgroups, its\n"
          "directory and its record, and prints what it removed ([{project, sandbox, dir}] with\n"
          "--json). A record with a field that is not what this home writes (a directory or\n"
          "cgroup elsewhere, a project that is no project name...) is left alone and nothing it\n"
          "points at is touched; so is a Sandbox whose remains cannot all be removed yet\n"
          "(its record stays for the next reclaim). Both are printed as 'left alone: WHY'\n"
          "(left_alone with --json). Running Sandboxes are not affected. 'project\n"
          "list_sandboxes' and 'sandbox create' reclaim too.\n",
          NULL, "clean up after Sandboxes whose daemon died" },
};

/* --help's COMMANDS list: "    USAGE  SUMMARY", the usage taken from each command's own
 * text; a usage too long for the left column goes on a line of its own. */
#define SUMMARY_COLUMN 39
static void print_main_help(void) {
        fputs(main_help_head, stdout);
        for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
                const char *usage = commands[i].help + strlen("layerfs ");
                int n = (int)strcspn(usage, "\n"), left = SUMMARY_COLUMN - 4 - 2;
                if (n <= left)
                        printf("    %-*.*s  ", left, n, usage);
                else
                        printf("    %.*s\n%*s", n, usage, SUMMARY_COLUMN, "");
                for (const char *p = commands[i].summary;;) {
                        size_t k = strcspn(p, "\n");
                        printf("%.*s\n", (int)k, p);
                        if (!p[k])
                                break;
                        p += k + 1;
                        printf("%*s", SUMMARY_COLUMN, "");
                }
        }
        fputs(main_help_tail, stdout);
}

static void usage_error(cli_ctx *ctx, const char *fmt, ...) _cli_printf_(2, 3);

static void print_error(cli_ctx *ctx, const lfs_error *e) {
        if (ctx->json) {
                /* The same error object the daemon's answers carry (error_json.c); on stderr
                 * as text too when stdout takes nothing (full, closed). */
                cli_print_json(json_pack("{s:o}", "error", lfs_error_to_json(e)));
                if (fflush(stdout) == 0 && !ferror(stdout))
                        return;
        }
        /* A message may name what a command chose (a path, a symlink's target). */
        _cleanup_free_ char *message = lfs_quote(e->message, LFS_QUOTE_INLINE);
        fprintf(stderr, "%s: %s\n", lfs_code_name(e->code), message);
        for (size_t i = 0; i < e->n_paths; i++) {
                _cleanup_free_ char *path = lfs_quote(e->paths[i], LFS_QUOTE_ENTRY);
                fprintf(stderr, "  %s\n", path);
        }
}

int cli_report(cli_ctx *ctx, int r) {
        if (r >= 0)
                return 0;
        if (ctx->err)
                print_error(ctx, ctx->err);
        else {
                lfs_error e = { .code = LFS_FAILED, .message = strerror(-r) };
                print_error(ctx, &e);
        }
        return EXIT_LAYERFS;
}

static void usage_error(cli_ctx *ctx, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        lfs_failv(&ctx->err, LFS_INVALID_INPUT, 0, fmt, ap);
        va_end(ap);
}

void cli_print_json(json_t *value) {
        char *text = json_dumps(value, JSON_INDENT(2) | JSON_ENCODE_ANY);
        /* JSON escapes control characters but leaves C1 controls and overrides raw: a name a
         * command chose (a --cwd in an error) must not drive the reader's terminal. */
        _cleanup_free_ char *shown = text ? lfs_quote(text, LFS_QUOTE_JSON) : NULL;
        if (shown)
                puts(shown);
        free(text);
        json_decref(value);
}

static const command *find_command(const char *group, const char *method) {
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (!strcmp(commands[i].group, group) && !strcmp(commands[i].method, method))
                        return &commands[i];
        return NULL;
}

static bool group_known(const char *group) {
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (!strcmp(commands[i].group, group))
                        return true;
        return false;
}

static bool listed(const char *list, const char *name) {
        size_t len = strlen(name);
        for (const char *p = list ? list : ""; *p;) {
                size_t n = strcspn(p, ",");
                if (n == len && !strncmp(p, name, n))
                        return true;
                p += n + (p[n] == ',');
        }
        return false;
}

bool cli_flag(const cli_ctx *ctx, const char *name) {
        return cli_option(ctx, name) != NULL;
}

const char *cli_option(const cli_ctx *ctx, const char *name) {
        for (size_t i = 0; i < ctx->n_opts; i++)
                if (!strcmp(ctx->opts[i].name, name))
                        return ctx->opts[i].value;
        return NULL;
}

static void progress(void *userdata, const char *phase, uint64_t done, uint64_t total) {
        cli_ctx *ctx = userdata;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
        if (ms - ctx->last_progress_ms < 100 && done != total)
                return;
        ctx->last_progress_ms = ms;
        /* The phase names what done counts ("reading files"). */
        if (total)
                fprintf(stderr, "\r\033[K%s: %llu/%llu ", phase, (unsigned long long)done,
                        (unsigned long long)total);
        else
                fprintf(stderr, "\r\033[K%s: %llu ", phase, (unsigned long long)done);
        ctx->progress_shown = true;
}

void cli_end_progress(cli_ctx *ctx) {
        if (ctx->progress_shown)
                fputs("\r\033[K", stderr);
        ctx->progress_shown = false;
}

/* Splits argv into globals, the command, its options and its positional arguments. */
static int parse(cli_ctx *ctx, int argc, char **argv, const command **ret_cmd, bool *ret_help) {
        const char *words[2] = { NULL, NULL };
        size_t n_words = 0;
        const command *cmd = NULL;
        bool dashdash = false;
        for (int i = 1; i < argc; i++) {
                char *a = argv[i];
                if (!dashdash && !strcmp(a, "--")) {
                        dashdash = true;
                        continue;
                }
                if (dashdash || a[0] != '-' || !a[1]) {
                        if (n_words < 2) {
                                words[n_words++] = a;
                                if (n_words == 2)
                                        cmd = find_command(words[0], words[1]);
                        } else {
                                GROW(ctx->args, ctx->cap_args, ctx->n_args + 1);
                                ctx->args[ctx->n_args++] = a;
                        }
                        continue;
                }
                /* --name=value, --name value, -m value */
                char *name = a + (a[1] == '-' ? 2 : 1);
                char *value = NULL;
                char *eq = strchr(name, '=');
                _cleanup_free_ char *key = eq ? strndup(name, (size_t)(eq - name)) : xstrdup(name);
                if (eq)
                        value = eq + 1;
                if (!strcmp(key, "help") || !strcmp(key, "h")) {
                        *ret_help = true;
                        continue;
                }
                if (!strcmp(key, "json")) {
                        ctx->json = true;
                        continue;
                }
                if (!strcmp(key, "version")) {
                        ctx->version = true;
                        continue;
                }
                bool global = !strcmp(key, "home") || !strcmp(key, "project");
                if (cmd && listed(cmd->flags, key) && !eq) {
                        GROW(ctx->opts, ctx->cap_opts, ctx->n_opts + 1);
                        ctx->opts[ctx->n_opts++] = (cli_opt){ .name = TAKE_PTR(key), .value = "1" };
                        continue;
                }
                if (!global && !(cmd && listed(cmd->options, key)) && !(n_words < 2)) {
                        usage_error(ctx,
                                    "unknown option '%s' for 'layerfs %s %s'; see 'layerfs %s %s --help'", a,
                                    words[0], words[1], words[0], words[1]);
                        return -EINVAL;
                }
                if (!global && n_words < 2) {
                        usage_error(ctx, "unknown option '%s' before the command; see 'layerfs --help'", a);
                        return -EINVAL;
                }
                if (!value) {
                        if (i + 1 >= argc) {
                                usage_error(ctx, "option '%s' needs a value", a);
                                return -EINVAL;
                        }
                        value = argv[++i];
                }
                if (!strcmp(key, "home"))
                        ctx->home_dir = value;
                else if (!strcmp(key, "project"))
                        ctx->project = value;
                else {
                        GROW(ctx->opts, ctx->cap_opts, ctx->n_opts + 1);
                        ctx->opts[ctx->n_opts++] = (cli_opt){ .name = TAKE_PTR(key), .value = value };
                }
        }
        if (*ret_help || ctx->version) {
                *ret_cmd = cmd;
                return 0;
        }
        if (n_words == 0) {
                usage_error(ctx, "no command given; see 'layerfs --help'");
                return -EINVAL;
        }
        if (!cmd) {
                if (!group_known(words[0]))
                        usage_error(
                                ctx,
                                "unknown command group '%s'; the groups are project, branch, sandbox, workspace, process and runtime; see 'layerfs --help'",
                                words[0]);
                else if (!words[1])
                        usage_error(ctx, "'layerfs %s' needs a method; see 'layerfs --help'", words[0]);
                else
                        usage_error(ctx, "unknown command 'layerfs %s %s'; see 'layerfs --help'", words[0],
                                    words[1]);
                return -EINVAL;
        }
        if ((int)ctx->n_args < cmd->min_args || (int)ctx->n_args > cmd->max_args) {
                /* Commands that take a COMMAND... after '--' have no upper bound worth naming. */
                bool open_ended = cmd->max_args > 64;
                int shown = open_ended ? cmd->min_args : cmd->max_args;
                usage_error(ctx, "'layerfs %s %s' takes %s%d argument%s, not %zu; usage: %.*s", cmd->group,
                            cmd->method, open_ended ? "at least " : "", shown, shown == 1 ? "" : "s",
                            ctx->n_args, (int)strcspn(cmd->help, "\n"), cmd->help);
                return -EINVAL;
        }
        *ret_cmd = cmd;
        return 0;
}

static void ctx_done(cli_ctx *ctx) {
        for (size_t i = 0; i < ctx->n_opts; i++)
                free(ctx->opts[i].name);
        free(ctx->opts);
        free(ctx->args);
        free(ctx->done);
        lfs_store_close(ctx->store);
        lfs_home_close(ctx->home);
        lfs_error_free(ctx->err);
}

int cli_open_home(cli_ctx *ctx) {
        int r = lfs_home_open(ctx->home_dir, &ctx->home, &ctx->err);
        if (r == 0 && !ctx->json && isatty(STDERR_FILENO))
                lfs_home_set_progress(ctx->home, progress, ctx);
        return r;
}

int cli_positive_option(cli_ctx *ctx, const char *name, size_t fallback, size_t *ret) {
        const char *text = cli_option(ctx, name);
        *ret = fallback;
        if (!text)
                return 0;
        _cleanup_free_ char *what = xasprintf("--%s", name);
        uint64_t v;
        int r = lfs_parse_whole(what, text, 1, SIZE_MAX, &v, &ctx->err);
        if (r == 0)
                *ret = (size_t)v;
        return r;
}

int cli_open_store(cli_ctx *ctx) {
        int r = cli_open_home(ctx);
        if (r < 0)
                return r;
        const char *project = ctx->project ? ctx->project : getenv("LAYERFS_PROJECT");
        if (project && !*project)
                project = NULL;
        return lfs_store_open(ctx->home, project, &ctx->store, &ctx->err);
}

int cli_flush_output(cli_ctx *ctx, bool broken_pipe_fails) {
        sigset_t pipe_set, old;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        sigset_t pending;
        sigpending(&pending);
        bool was_pending = sigismember(&pending, SIGPIPE);
        if (broken_pipe_fails)
                sigprocmask(SIG_BLOCK, &pipe_set, &old);
        errno = 0;
        bool written = fflush(stdout) == 0 && !ferror(stdout);
        int e = errno;
        if (broken_pipe_fails) {
                struct timespec none = { 0 };
                if (e == EPIPE && !was_pending) /* ours: taken, so that it does not end us now */
                        (void)sigtimedwait(&pipe_set, NULL, &none);
                sigprocmask(SIG_SETMASK, &old, NULL);
        }
        if (written)
                return 0;
        /* errno is the last flush's; an earlier one that failed left no errno to tell. */
        lfs_fail(&ctx->err, LFS_FAILED, e ? e : EIO,
                 "cannot write the output to standard output: %s; give it a file or pipe that takes it",
                 e ? strerror(e) : "an earlier write to it failed");
        return ctx->done ? lfs_error_append(&ctx->err, "; %s all the same", ctx->done) : -(e ? e : EIO);
}

/* A standard stream the caller closed holds a descriptor that refuses reads and writes
 * (EBADF, as a closed one does) for this run: otherwise the first file the CLI opens (an
 * exported file, a lock, the home's directory) would take its number, and output meant for
 * the stream would go into that file, or a command be given it as its stdin. A path
 * descriptor of /dev/null, not of a directory: nothing can be opened beneath it. */
static void hold_closed_std_fds(void) {
        for (int fd = 0; fd <= STDERR_FILENO; fd++)
                if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
                        (void)open("/dev/null", O_PATH); /* the lowest free number: fd */
}

int main(int argc, char **argv) {
        hold_closed_std_fds();
        cli_ctx ctx = { 0 };
        const command *cmd = NULL;
        bool help = false;
        int r = parse(&ctx, argc, argv, &cmd, &help);
        int status;
        if (r == 0 && ctx.version) {
                printf("layerfs %s\n", LAYERFS_VERSION);
                status = cli_report(&ctx, cli_flush_output(&ctx, false));
        } else if (r == 0 && help) {
                if (cmd)
                        fputs(cmd->help, stdout);
                else
                        print_main_help();
                status = cli_report(&ctx, cli_flush_output(&ctx, false));
        } else if (r < 0) {
                status = cli_report(&ctx, r);
        } else {
                r = cmd->run(&ctx);
                cli_end_progress(&ctx);
                /* What the command printed is its answer: one that did not reach its reader
                 * (a full disk, a closed stream) is a failure, not a success with no output. */
                if (r >= 0)
                        r = cli_flush_output(&ctx, false);
                status = r < 0 ? cli_report(&ctx, r) : ctx.exit_status;
                /* An exec's status is its command's (SPEC 2a), also when its report is lost:
                 * a caller must not take a command that ran for one that never did. */
                if (r < 0 && ctx.command_ran)
                        status = ctx.exit_status;
        }
        ctx_done(&ctx);
        return status;
}
