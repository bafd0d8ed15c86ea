#!/usr/bin/env python3
"""fsops.py - differential filesystem test for LayerFS Workspaces.

The same deterministic stream of random filesystem operations is applied to two
directories (typically a plain reference directory and a mounted Workspace);
every result must be identical and the two trees are compared periodically.

  fsops.py run --seed S --ops N --check-every K [--forget-at-checks] DIR_A DIR_B
  fsops.py compare DIR_A DIR_B
  fsops.py manifest DIR

Operations are chosen from DIR_A's namespace (sizes for writes are read from
DIR_A too), so put the trusted reference directory first: then a given seed
produces the same operation stream on every run.

Exit status: 0 ok, 1 divergence or tree mismatch, 2 usage error.
Python 3 standard library only.
"""

import argparse
import collections
import errno
import hashlib
import os
import stat
import random
import sys
import time

KiB = 1024
MAX_DEPTH = 4               # path components of any entry ("a/b/c/d")
MAX_FILE_SIZE = 256 * KiB   # writes and truncates keep files below this
MIN_ENTRIES, MAX_ENTRIES = 50, 300   # range of the target population
TARGET_SLACK = 20           # no bias while within this of the target
MAX_REPORTED_DIFFERENCES = 20
HISTORY_SHOWN = 15          # recent operations printed with a failure report

# Relative names are drawn from a small pool so that operations often collide
# with existing entries (EEXIST, rename onto an existing target, ...). The odd
# names check that the Workspace passes names through byte for byte.
NAME_POOL = [f"n{i}" for i in range(24)] + [
    "file.txt", "Makefile", "run.sh", ".hidden", "with space", "UPPER",
    "\u00fcn\u00efc\u00f8d\u00e9", "x" * 200,
]

# Absolute symlink targets point nowhere on purpose: even a tool that wrongly
# followed one could not touch anything outside the trees.
ABSOLUTE_TARGETS = ["/nonexistent-fsops/target", "/nonexistent-fsops/dir/",
                    "/nonexistent-fsops"]


# --------------------------------------------------------------------------
# Paths and small helpers

def depth(rel):
    """Number of path components; the tree root "" has depth 0."""
    return 0 if rel == "" else rel.count("/") + 1


def join(parent, name):
    return name if parent == "" else parent + "/" + name


def is_inside(rel, ancestor):
    """True if rel is ancestor itself or lies below it."""
    return ancestor == "" or rel == ancestor or rel.startswith(ancestor + "/")


def at(root, rel):
    return root if rel == "" else os.path.join(root, rel)


def quote(text):
    """Printable, unambiguous form of a path or symlink target (any bytes)."""
    raw = os.fsencode(text)
    raw = raw.replace(b"\\", b"\\\\").replace(b"\n", b"\\n").replace(b"\t", b"\\t")
    return raw.decode("utf-8", "backslashreplace")


def errno_name(error):
    return errno.errorcode.get(error.errno, f"errno{error.errno}")


def show_result(result):
    status, value = result
    if status != "ok":
        return status
    return "ok" if value is None else f"ok {value!r}"


def choose_weighted(rng, weights):
    """One key of a {name: weight} dict; deterministic for a given rng state."""
    names = [name for name, weight in weights.items() if weight > 0]
    return rng.choices(names, [weights[name] for name in names])[0]


# --------------------------------------------------------------------------
# Low-level I/O that never follows a symlink in the last path component

def open_nofollow(path, flags, mode=0o644):
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def write_all(fd, data, offset=None):
    view = memoryview(data)
    while view:
        if offset is None:
            written = os.write(fd, view)
        else:
            written = os.pwrite(fd, view, offset)
            offset += written
        view = view[written:]


def read_all(path):
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1024 * KiB)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def sha256_of_file(path):
    digest = hashlib.sha256()
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        while True:
            chunk = os.read(fd, 1024 * KiB)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------
# Walking a real tree (lstat only: symlinks are never followed)

class Entry:
    """What the comparison needs to know about one path."""
    __slots__ = ("kind", "perm", "size", "nlink", "ino", "mtime_ns",
                 "sha256", "target", "names")

    def __init__(self, st):
        self.kind = kind_of_mode(st.st_mode)
        self.perm = stat.S_IMODE(st.st_mode)
        self.size = st.st_size
        self.nlink = st.st_nlink
        self.ino = st.st_ino
        self.mtime_ns = st.st_mtime_ns
        self.sha256 = self.target = self.names = None


def kind_of_mode(mode):
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "special"   # fifo, socket, device: never made by this tool


def walk_tree(root):
    """{relative path: Entry} for root and everything below it."""
    tree = {}
    pending = [""]
    while pending:
        rel = pending.pop()
        path = at(root, rel)
        entry = Entry(os.lstat(path))
        tree[rel] = entry
        try:
            if entry.kind == "file":
                entry.sha256 = sha256_of_file(path)
            elif entry.kind == "symlink":
                entry.target = os.readlink(path)
            elif entry.kind == "dir":
                entry.names = sorted(os.listdir(path))
                pending.extend(join(rel, name) for name in entry.names)
        except OSError as error:
            # Keep walking: the unreadable path shows up as a difference.
            entry.sha256 = entry.target = f"<{errno_name(error)}>"
    return tree


def hard_link_groups(tree):
    """{path: tuple of all paths sharing its inode} for linked non-directories."""
    by_inode = collections.defaultdict(list)
    for rel, entry in tree.items():
        if entry.kind != "dir":
            by_inode[entry.ino].append(rel)
    groups = {}
    for paths in by_inode.values():
        if len(paths) > 1:
            for rel in paths:
                groups[rel] = tuple(sorted(paths))
    return groups


def diff_trees(tree_a, tree_b, pinned_inodes_a=frozenset()):
    """List of (path, what, value in A, value in B), sorted by path.

    mtime is compared only for regular files whose inode in A is in
    pinned_inodes_a (set by an explicit utime and not modified since).
    """
    differences = []

    def differ(rel, what, value_a, value_b):
        if value_a != value_b:
            differences.append((rel, what, value_a, value_b))

    for rel in sorted(tree_a.keys() | tree_b.keys()):
        a, b = tree_a.get(rel), tree_b.get(rel)
        if a is None or b is None:
            differ(rel, "exists", a is not None, b is not None)
            continue
        differ(rel, "type", a.kind, b.kind)
        if a.kind != b.kind:
            continue
        if a.kind == "file":
            differ(rel, "size", a.size, b.size)
            differ(rel, "sha256", a.sha256, b.sha256)
            differ(rel, "mode", oct(a.perm), oct(b.perm))
            differ(rel, "nlink", a.nlink, b.nlink)
            if a.ino in pinned_inodes_a:
                differ(rel, "mtime_ns", a.mtime_ns, b.mtime_ns)
        elif a.kind == "symlink":
            differ(rel, "target", a.target, b.target)
        elif a.kind == "dir":
            differ(rel, "mode", oct(a.perm), oct(b.perm))
            differ(rel, "names", a.names, b.names)

    groups_a, groups_b = hard_link_groups(tree_a), hard_link_groups(tree_b)
    for rel in sorted(groups_a.keys() | groups_b.keys()):
        if rel in tree_a and rel in tree_b:
            differ(rel, "hard-link group", groups_a.get(rel, (rel,)),
                   groups_b.get(rel, (rel,)))
    differences.sort(key=lambda difference: difference[0])
    return differences


def print_differences(differences, out=sys.stdout):
    for rel, what, value_a, value_b in differences[:MAX_REPORTED_DIFFERENCES]:
        print(f"  {quote(rel) or '.'}: {what}: A={value_a!r} B={value_b!r}", file=out)
    hidden = len(differences) - MAX_REPORTED_DIFFERENCES
    if hidden > 0:
        print(f"  ... and {hidden} more differences", file=out)


# --------------------------------------------------------------------------
# The model: DIR_A's namespace, kept in memory so that picking a path does not
# need a walk per operation. It is updated from each successful operation and
# replaced by a real walk of DIR_A at every check, so it cannot drift for long.

class Model:
    def __init__(self):
        self.kinds = {"": "dir"}     # relative path -> "file" | "dir" | "symlink"
        self._sorted_cache = None

    def reset_from(self, tree):
        self.kinds = {rel: entry.kind for rel, entry in tree.items()
                      if entry.kind in ("file", "dir", "symlink")}
        self._changed()

    def _changed(self):
        self._sorted_cache = None

    def _by_kind(self):
        """Sorted paths per kind (sorted, so that picks are reproducible), plus
        "empty dir"; recomputed only after the namespace changed."""
        if self._sorted_cache is None:
            by_kind = {"file": [], "dir": [], "symlink": []}
            for rel in sorted(self.kinds):
                by_kind[self.kinds[rel]].append(rel)
            parents = {rel.rpartition("/")[0] for rel in self.kinds if rel}
            by_kind["empty dir"] = [rel for rel in by_kind["dir"] if rel not in parents]
            self._sorted_cache = by_kind
        return self._sorted_cache

    def files(self):
        return self._by_kind()["file"]

    def symlinks(self):
        return self._by_kind()["symlink"]

    def dirs(self):
        return self._by_kind()["dir"]

    def non_root_dirs(self):
        return self.dirs()[1:] if self.dirs()[:1] == [""] else self.dirs()

    def entry_count(self):
        return len(self.kinds) - 1

    def exists(self, rel):
        return rel in self.kinds

    def empty_dirs(self):
        return [rel for rel in self._by_kind()["empty dir"] if rel != ""]

    def subtree(self, rel):
        return [other for other in self.kinds if is_inside(other, rel)]

    def subtree_height(self, rel):
        """Depth of the deepest entry below rel, counted from rel (0 if none)."""
        return max(depth(other) - depth(rel) for other in self.subtree(rel))

    def add(self, rel, kind):
        self.kinds[rel] = kind
        self._changed()

    def remove(self, rel):
        for other in self.subtree(rel):
            if other != "":
                del self.kinds[other]
        self._changed()

    def move(self, source, target):
        moved = {target + other[len(source):]: self.kinds[other]
                 for other in self.subtree(source)}
        self.remove(source)
        self.remove(target)   # an emptied directory or a replaced file
        self.kinds.update(moved)
        self._changed()


class Pins:
    """Regular files (by inode in DIR_A) whose mtime was set by utime and not
    modified since: only for those is mtime expected to be equal."""

    def __init__(self, dir_a):
        self.dir_a = dir_a
        self.inodes = set()

    def _inode(self, rel):
        try:
            return os.lstat(at(self.dir_a, rel)).st_ino
        except OSError:
            return None

    def pin(self, rel):
        self.inodes.add(self._inode(rel))

    def unpin(self, rel):
        self.inodes.discard(self._inode(rel))


# --------------------------------------------------------------------------
# Operations

class Op:
    """One operation: `action(root)` performs it inside one tree and returns a
    value that must be equal for both trees; `on_success()` updates the model."""

    def __init__(self, kind, text, action, on_success=None):
        self.kind = kind
        self.text = text
        self.action = action
        self.on_success = on_success or (lambda: None)


def perform(action, root):
    try:
        return ("ok", action(root))
    except OSError as error:
        return (errno_name(error), None)


BASE_WEIGHTS = {
    "create": 12, "write": 10, "append": 6, "truncate": 5, "rename": 10,
    "unlink": 7, "link": 3, "symlink": 4, "mkdir": 4, "rmdir": 4,
    "chmod": 4, "utime": 4, "read": 10, "list": 5, "stat": 4,
}
GROWING_KINDS = ("create", "link", "symlink", "mkdir")
SHRINKING_KINDS = ("unlink", "rmdir")


class OpGenerator:
    """Draws random operations from the current model of DIR_A."""

    def __init__(self, rng, model, pins, dir_a):
        self.rng = rng
        self.model = model
        self.pins = pins
        self.dir_a = dir_a
        self.recent_payloads = collections.deque(maxlen=8)
        self.target_entries = rng.randint(MIN_ENTRIES, MAX_ENTRIES)

    # ---- choosing what to do

    def next_op(self):
        weights = dict(BASE_WEIGHTS)
        # The population follows a target that moves now and then, so the
        # tree both grows and shrinks (deletions matter as much as creations)
        # while staying within MIN_ENTRIES..MAX_ENTRIES.
        if self.rng.random() < 1 / 2000:
            self.target_entries = self.rng.randint(MIN_ENTRIES, MAX_ENTRIES)
        count = self.model.entry_count()
        grow, shrink = (3.0, 0.3) if count < self.target_entries - TARGET_SLACK else \
            (0.3, 3.0) if count > self.target_entries + TARGET_SLACK else (1.0, 1.0)
        for kind in GROWING_KINDS:
            weights[kind] *= grow
        for kind in SHRINKING_KINDS:
            weights[kind] *= shrink
        while True:
            kind = choose_weighted(self.rng, weights)
            op = getattr(self, "make_" + kind)()
            if op is not None:    # None: nothing suitable exists right now
                return op

    # ---- choosing paths

    def pick(self, candidates):
        return self.rng.choice(candidates) if candidates else None

    def parent_for_new_entry(self):
        """A directory in which a new entry stays within MAX_DEPTH."""
        return self.pick([rel for rel in self.model.dirs() if depth(rel) < MAX_DEPTH])

    def fresh_name(self, parent, want_new=True):
        """A name in parent; almost always unused when want_new."""
        for _ in range(8):
            rel = join(parent, self.rng.choice(NAME_POOL))
            if not want_new or not self.model.exists(rel):
                return rel
        return join(parent, f"fresh{self.rng.randrange(10**6)}")

    def new_path(self, collide_probability=0.1):
        """A path for a new entry; with collide_probability, maybe an existing one."""
        parent = self.parent_for_new_entry()
        if parent is None:
            return None
        return self.fresh_name(parent, want_new=self.rng.random() >= collide_probability)

    def broken_path(self):
        """A path that cannot exist: under a missing directory or under a file."""
        files = self.model.files()
        if files and self.rng.random() < 0.5:
            return join(self.pick(files), "below-a-file")
        return join(self.fresh_name(self.pick(self.model.dirs())), "missing")

    def size_in_a(self, rel):
        try:
            return os.lstat(at(self.dir_a, rel)).st_size
        except OSError:
            return 0

    # ---- choosing data

    def random_size(self):
        roll = self.rng.random()
        if roll < 0.10:
            return 0
        if roll < 0.18:
            return self.rng.randint(64 * KiB + 1, 200 * KiB)
        if roll < 0.55:
            return self.rng.randint(1, 4 * KiB)
        return self.rng.randint(1, 64 * KiB)

    def random_payload(self, size):
        roll = self.rng.random()
        if roll < 0.2 and size:
            # Repetitive content, as in real source trees (compressible).
            chunk = self.rng.randbytes(self.rng.randint(1, 64))
            return (chunk * (size // len(chunk) + 1))[:size]
        return self.rng.randbytes(size)

    def file_content(self):
        # Now and then reuse earlier content, so that a content-addressed
        # Store sees identical blobs in several files.
        if self.recent_payloads and self.rng.random() < 0.08:
            return self.pick(list(self.recent_payloads))
        data = self.random_payload(self.random_size())
        self.recent_payloads.append(data)
        return data

    # ---- the operations; each returns an Op or None

    def make_create(self):
        roll = self.rng.random()
        if roll < 0.05:
            rel = self.broken_path()
        elif roll < 0.15:   # rewrite an existing entry (file: truncate; else error)
            rel = self.pick(self.model.files() + self.model.symlinks()
                            + self.model.non_root_dirs())
        else:
            rel = self.new_path(collide_probability=0)
        if rel is None:
            return None
        data = self.file_content()
        mode = self.rng.choice([0o644, 0o755, 0o600])

        def action(root):
            fd = open_nofollow(at(root, rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            try:
                write_all(fd, data)
            finally:
                os.close(fd)

        def on_success():
            if not self.model.exists(rel):
                self.model.add(rel, "file")
            self.pins.unpin(rel)

        return Op("create", f"create {quote(rel)!r} {len(data)} bytes mode {oct(mode)}",
                  action, on_success)

    def make_write(self):
        rel = self.pick(self.model.files())
        if rel is None:
            return None
        size = self.size_in_a(rel)
        length = self.rng.choice([0, 1, self.rng.randint(1, 4 * KiB),
                                  self.rng.randint(1, 16 * KiB), self.rng.randint(1, 64 * KiB)])
        roll = self.rng.random()
        if roll < 0.15:
            offset = 0
        elif roll < 0.75:
            offset = self.rng.randint(0, size)
        else:   # past end of file: leaves a hole
            offset = size + self.rng.randint(1, 64 * KiB)
        offset = max(0, min(offset, MAX_FILE_SIZE - length))
        data = self.random_payload(length)

        def action(root):
            fd = open_nofollow(at(root, rel), os.O_WRONLY)
            try:
                write_all(fd, data, offset)
            finally:
                os.close(fd)

        return Op("write", f"pwrite {quote(rel)!r} offset {offset} length {length} (size {size})",
                  action, lambda: self.pins.unpin(rel))

    def make_append(self):
        rel = self.pick(self.model.files())
        if rel is None:
            return None
        room = max(0, MAX_FILE_SIZE - self.size_in_a(rel))
        data = self.random_payload(min(room, self.rng.randint(0, 8 * KiB)))

        def action(root):
            fd = open_nofollow(at(root, rel), os.O_WRONLY | os.O_APPEND)
            try:
                write_all(fd, data)
            finally:
                os.close(fd)

        return Op("append", f"append {quote(rel)!r} {len(data)} bytes",
                  action, lambda: self.pins.unpin(rel))

    def make_truncate(self):
        rel = self.pick(self.model.files())
        if rel is None:
            return None
        size = self.size_in_a(rel)
        roll = self.rng.random()
        if roll < 0.3:
            new_size = 0
        elif roll < 0.7:
            new_size = self.rng.randint(0, size)
        else:
            new_size = min(MAX_FILE_SIZE, size + self.rng.randint(1, 64 * KiB))
        # Both the path form (setattr without a handle) and ftruncate on an
        # open file exercise different paths in a FUSE filesystem.
        by_path = self.rng.random() < 0.5

        def action(root):
            if by_path:
                os.truncate(at(root, rel), new_size)
                return
            fd = open_nofollow(at(root, rel), os.O_WRONLY)
            try:
                os.ftruncate(fd, new_size)
            finally:
                os.close(fd)

        how = "truncate" if by_path else "ftruncate"
        return Op("truncate", f"{how} {quote(rel)!r} {size} -> {new_size}",
                  action, lambda: self.pins.unpin(rel))

    def make_rename(self):
        shape = choose_weighted(self.rng, {
            "file to new name": 30, "file onto file": 15, "file onto dir": 4,
            "dir to new name": 15, "dir onto empty dir": 8,
            "dir onto non-empty dir": 3, "dir onto file": 3,
            "dir into itself": 4, "missing source": 2, "onto itself": 2,
        })
        paths = self.rename_paths(shape)
        if paths is None:
            return None
        source, target = paths

        def action(root):
            os.rename(at(root, source), at(root, target))

        def on_success():
            # Renaming onto another link to the same inode succeeds without
            # doing anything, so ask DIR_A rather than assume.
            if not os.path.lexists(at(self.dir_a, source)):
                self.model.move(source, target)

        return Op("rename", f"rename ({shape}) {quote(source)!r} -> {quote(target)!r}",
                  action, on_success)

    def rename_paths(self, shape):
        model = self.model
        non_dirs = model.files() + model.symlinks()
        dirs = model.non_root_dirs()
        if shape == "missing source":
            return self.fresh_name(self.pick(model.dirs())), self.new_path()
        if shape == "onto itself":
            source = self.pick(non_dirs + dirs)
            return None if source is None else (source, source)
        if shape.startswith("file"):
            source = self.pick(non_dirs)
            if source is None:
                return None
            if shape == "file to new name":
                target = self.new_path(collide_probability=0)
            elif shape == "file onto file":
                target = self.pick([rel for rel in non_dirs if rel != source])
            else:
                target = self.pick(dirs)
            return None if target is None else (source, target)

        source = self.pick(dirs)
        if source is None:
            return None
        height = model.subtree_height(source)
        outside = [rel for rel in model.dirs()
                   if not is_inside(rel, source) and depth(rel) + 1 + height <= MAX_DEPTH]
        if shape == "dir to new name":
            parent = self.pick(outside)
            target = None if parent is None else self.fresh_name(parent)
        elif shape == "dir onto empty dir":
            target = self.pick([rel for rel in model.empty_dirs()
                                if not is_inside(rel, source)
                                and depth(rel) + height <= MAX_DEPTH])
        elif shape == "dir onto non-empty dir":
            empty = set(model.empty_dirs())
            target = self.pick([rel for rel in dirs if rel != source and rel not in empty])
        elif shape == "dir onto file":
            target = self.pick(model.files())
        else:   # "dir into itself": must fail with EINVAL
            target = self.fresh_name(self.pick(
                [rel for rel in model.dirs() if is_inside(rel, source)]))
        return None if target is None else (source, target)

    def make_unlink(self):
        roll = self.rng.random()
        if roll < 0.05:
            rel = self.fresh_name(self.pick(self.model.dirs()))   # ENOENT
        elif roll < 0.12:
            rel = self.pick(self.model.non_root_dirs())           # EISDIR
        else:
            rel = self.pick(self.model.files() + self.model.symlinks())
        if rel is None:
            return None

        def action(root):
            os.unlink(at(root, rel))

        return Op("unlink", f"unlink {quote(rel)!r}", action,
                  lambda: self.model.remove(rel))

    def make_link(self):
        roll = self.rng.random()
        source = self.pick(self.model.non_root_dirs() if roll < 0.05   # EPERM
                           else self.model.files())
        target = self.new_path(collide_probability=0.1)
        if source is None or target is None:
            return None

        def action(root):
            os.link(at(root, source), at(root, target), follow_symlinks=False)

        return Op("link", f"link {quote(source)!r} -> {quote(target)!r}", action,
                  lambda: self.model.add(target, "file"))

    def symlink_target(self, link):
        roll = self.rng.random()
        if roll < 0.25:
            return self.rng.choice(ABSOLUTE_TARGETS)
        if roll < 0.3:
            return "." if self.rng.random() < 0.5 else os.path.basename(link)
        # Relative targets never contain "..": wherever the link is later
        # moved, it cannot point outside the tree.
        parent = os.path.dirname(link)
        below = [rel[len(parent) + 1 if parent else 0:]
                 for rel in self.model.kinds if rel and is_inside(rel, parent) and rel != parent]
        if below and roll < 0.7:
            return self.pick(sorted(below))
        return self.rng.choice(["missing", "missing/deeper", "dangling.txt", "sub/x"])

    def make_symlink(self):
        link = self.new_path(collide_probability=0.1)
        if link is None:
            return None
        target = self.symlink_target(link)

        def action(root):
            os.symlink(target, at(root, link))

        return Op("symlink", f"symlink {quote(link)!r} -> {quote(target)!r}", action,
                  lambda: self.model.add(link, "symlink"))

    def make_mkdir(self):
        rel = self.new_path(collide_probability=0.1)
        if rel is None:
            return None
        mode = self.rng.choice([0o755, 0o700, 0o777])

        def action(root):
            os.mkdir(at(root, rel), mode)

        return Op("mkdir", f"mkdir {quote(rel)!r} {oct(mode)}", action,
                  lambda: self.model.add(rel, "dir"))

    def make_rmdir(self):
        roll = self.rng.random()
        if roll < 0.6:
            rel = self.pick(self.model.empty_dirs())
        elif roll < 0.9:
            rel = self.pick(self.model.non_root_dirs())   # ENOTEMPTY if non-empty
        else:
            rel = self.pick(self.model.files())      # ENOTDIR
        if rel is None:
            return None

        def action(root):
            os.rmdir(at(root, rel))

        return Op("rmdir", f"rmdir {quote(rel)!r}", action,
                  lambda: self.model.remove(rel))

    def make_chmod(self):
        # Files stay owner read/write and directories owner rwx, so the test
        # itself can always read and traverse everything.
        if self.rng.random() < 0.7:
            rel, mode = self.pick(self.model.files()), self.rng.randint(0o600, 0o777)
        else:
            rel, mode = self.pick(self.model.non_root_dirs()), self.rng.randint(0o700, 0o777)
        if rel is None:
            return None

        def action(root):
            os.chmod(at(root, rel), mode)

        return Op("chmod", f"chmod {quote(rel)!r} {oct(mode)}", action)

    def make_utime(self):
        is_file = self.rng.random() < 0.85
        rel = self.pick(self.model.files() if is_file else self.model.non_root_dirs())
        if rel is None:
            return None
        # Between 2001 and 2030, with nanoseconds, to catch lost precision.
        atime_ns = self.rng.randrange(10**18, 19 * 10**17)
        mtime_ns = self.rng.randrange(10**18, 19 * 10**17)

        def action(root):
            os.utime(at(root, rel), ns=(atime_ns, mtime_ns), follow_symlinks=False)

        def on_success():
            if is_file:
                self.pins.pin(rel)

        return Op("utime", f"utime {quote(rel)!r} mtime_ns {mtime_ns}", action, on_success)

    def make_read(self):
        roll = self.rng.random()
        if roll < 0.1 and self.model.symlinks():
            rel = self.pick(self.model.symlinks())
            return Op("read", f"readlink {quote(rel)!r}",
                      lambda root: os.readlink(at(root, rel)))
        rel = self.broken_path() if roll < 0.13 else self.pick(self.model.files())
        if rel is None:
            return None
        if roll < 0.3:
            offset = self.rng.randint(0, self.size_in_a(rel) + 100)
            length = self.rng.randint(0, 64 * KiB)

            def read_range(root):
                fd = open_nofollow(at(root, rel), os.O_RDONLY)
                try:
                    return describe_bytes(os.pread(fd, length, offset))
                finally:
                    os.close(fd)

            return Op("read", f"pread {quote(rel)!r} offset {offset} length {length}",
                      read_range)
        return Op("read", f"read {quote(rel)!r}",
                  lambda root: describe_bytes(read_all(at(root, rel))))

    def make_list(self):
        rel = self.pick(self.model.files()) if self.rng.random() < 0.05 \
            else self.pick(self.model.dirs())                        # ENOTDIR
        if rel is None:
            return None
        return Op("list", f"listdir {quote(rel) or '.'!r}",
                  lambda root: sorted(os.listdir(at(root, rel))))

    def make_stat(self):
        everything = sorted(self.model.kinds)
        rel = self.broken_path() if self.rng.random() < 0.05 else self.pick(everything)

        def action(root):
            st = os.lstat(at(root, rel))
            kind = kind_of_mode(st.st_mode)
            # Directory sizes and symlink modes differ between filesystems
            # without being wrong, so they are left out.
            return (kind,
                    None if kind == "dir" else st.st_size,
                    None if kind == "symlink" else oct(stat.S_IMODE(st.st_mode)),
                    st.st_nlink if kind == "file" else None)

        return Op("stat", f"lstat {quote(rel) or '.'!r}", action)


def forget_all():
    """The kernel drops the dentries and inodes no one uses (root only): a FUSE
    filesystem gets a FORGET for each, and the operations after it meet entries the
    daemon let go of (a Workspace frees what its Store can give again)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as control:
        control.write("2")


def describe_bytes(data):
    """Comparable and printable summary of data read back (full equality via sha256)."""
    return f"{len(data)} bytes sha256 {hashlib.sha256(data).hexdigest()[:16]}"


# --------------------------------------------------------------------------
# The commands

class Runner:
    def __init__(self, seed, dir_a, dir_b, forget_at_checks=False):
        self.seed = seed
        self.forget_at_checks = forget_at_checks
        self.dir_a, self.dir_b = dir_a, dir_b
        self.model = Model()
        self.pins = Pins(dir_a)
        self.generator = OpGenerator(random.Random(seed), self.model, self.pins, dir_a)
        self.history = collections.deque(maxlen=HISTORY_SHOWN)
        self.done = collections.Counter()
        self.failed = collections.Counter()
        self.checks = 0
        self.entries_seen = []

    def run(self, ops, check_every):
        started = time.monotonic()
        if not self.check(0):
            return 1
        for number in range(1, ops + 1):
            op = self.generator.next_op()
            result_a = perform(op.action, self.dir_a)
            result_b = perform(op.action, self.dir_b)
            self.history.append((number, op.text, result_a, result_b))
            self.done[op.kind] += 1
            if result_a != result_b:
                self.report_divergence(number, op, result_a, result_b)
                return 1
            if result_a[0] == "ok":
                op.on_success()
            else:
                self.failed[op.kind] += 1
            if number % check_every == 0 or number == ops:
                if not self.check(number):
                    return 1
                if self.forget_at_checks:
                    forget_all()
        self.print_summary(ops, time.monotonic() - started)
        return 0

    def check(self, number):
        """Compare the real trees; also refreshes the model from DIR_A."""
        self.checks += 1
        tree_a = walk_tree(self.dir_a)
        tree_b = walk_tree(self.dir_b)
        self.model.reset_from(tree_a)
        self.entries_seen.append(self.model.entry_count())
        differences = diff_trees(tree_a, tree_b, self.pins.inodes)
        if not differences:
            return True
        print(f"fsops: TREES DIFFER at check after operation #{number} "
              f"(seed {self.seed}): {len(differences)} differences", file=sys.stderr)
        print_differences(differences, sys.stderr)
        self.print_history()
        return False

    def report_divergence(self, number, op, result_a, result_b):
        print(f"fsops: DIVERGENCE at operation #{number} (seed {self.seed}): {op.text}\n"
              f"  A ({self.dir_a}): {show_result(result_a)}\n"
              f"  B ({self.dir_b}): {show_result(result_b)}", file=sys.stderr)
        self.print_history()

    def print_history(self):
        if not self.history:
            return
        print("  recent operations (number, operation, result A | result B):", file=sys.stderr)
        for number, text, result_a, result_b in self.history:
            both = show_result(result_a) if result_a == result_b else \
                f"{show_result(result_a)} | {show_result(result_b)}"
            print(f"    #{number} {text}: {both}", file=sys.stderr)

    def print_summary(self, ops, seconds):
        kinds = ", ".join(
            f"{kind}={self.done[kind]}" + (f"({self.failed[kind]} err)" if self.failed[kind] else "")
            for kind in BASE_WEIGHTS if self.done[kind])
        print(f"fsops: {ops} operations, {self.checks} checks, ok; {kinds or 'no operations'}; "
              f"entries {min(self.entries_seen)}..{max(self.entries_seen)}; {seconds:.1f} s")


def command_run(args):
    for directory in (args.dir_a, args.dir_b):
        os.makedirs(directory, exist_ok=True)
    real_a, real_b = os.path.realpath(args.dir_a), os.path.realpath(args.dir_b)
    if is_inside(real_a, real_b) or is_inside(real_b, real_a):
        print("fsops: DIR_A and DIR_B must be separate trees", file=sys.stderr)
        return 2
    # The same umask on every run makes the created modes reproducible.
    os.umask(0o022)
    return Runner(args.seed, args.dir_a, args.dir_b, args.forget_at_checks).run(args.ops, args.check_every)


def missing_directories(*directories):
    missing = [d for d in directories if not os.path.isdir(d)]
    for directory in missing:
        print(f"fsops: not a directory: {directory}", file=sys.stderr)
    return bool(missing)


def command_compare(args):
    if missing_directories(args.dir_a, args.dir_b):
        return 2
    tree_a, tree_b = walk_tree(args.dir_a), walk_tree(args.dir_b)
    differences = diff_trees(tree_a, tree_b)
    if differences:
        print(f"fsops: trees differ: {len(differences)} differences", file=sys.stderr)
        print_differences(differences, sys.stderr)
        return 1
    print(f"fsops: {len(tree_a) - 1} entries, identical")
    return 0


def command_manifest(args):
    """What the Store records of a tree, one line per path, sorted:
         d <path>                       every directory (so empty ones show)
         f <path> <x|-> <sha256>        x: owner exec bit set
         l <path> <target>
    Fields are tab-separated. No mtimes, no other mode bits, no hard links
    (a hard link is just another file with the same content)."""
    if missing_directories(args.dir):
        return 2
    tree = walk_tree(args.dir)
    lines, skipped = [], 0
    for rel, entry in tree.items():
        if rel == "":
            continue
        if entry.kind == "dir":
            lines.append(f"d\t{quote(rel)}")
        elif entry.kind == "file":
            executable = "x" if entry.perm & stat.S_IXUSR else "-"
            lines.append(f"f\t{quote(rel)}\t{executable}\t{entry.sha256}")
        elif entry.kind == "symlink":
            lines.append(f"l\t{quote(rel)}\t{quote(entry.target)}")
        else:
            skipped += 1   # fifos, sockets, devices are not committed
    for line in sorted(lines, key=lambda line: line.split("\t")[1]):
        print(line)
    if skipped:
        print(f"fsops manifest: skipped {skipped} special files", file=sys.stderr)
    return 0


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="fsops.py", description="Differential filesystem test (see module docstring).")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="apply random operations to both trees")
    run.add_argument("--seed", type=int, required=True)
    run.add_argument("--ops", type=non_negative_int, required=True)
    run.add_argument("--check-every", type=positive_int, required=True)
    run.add_argument("--forget-at-checks", action="store_true",
                     help="drop the kernel's dentries and inodes after each check (root)")
    run.add_argument("dir_a", metavar="DIR_A")
    run.add_argument("dir_b", metavar="DIR_B")
    compare = commands.add_parser("compare", help="compare two trees")
    compare.add_argument("dir_a", metavar="DIR_A")
    compare.add_argument("dir_b", metavar="DIR_B")
    manifest = commands.add_parser("manifest", help="print what the Store would record")
    manifest.add_argument("dir", metavar="DIR")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    handler = {"run": command_run, "compare": command_compare,
               "manifest": command_manifest}[args.command]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
