#!/usr/bin/env python3
"""POSIX behaviours a Workspace must have, as a local disk has them.

usage: posix_checks.py [--workspace] DIR

--workspace: DIR is a Workspace, which refuses device nodes with EPERM (a local disk
takes them from root).

Runs each check in a fresh subdirectory of DIR and prints one line per check; exits 1
when any fails. Run it on a plain ext4 directory to see that the checks themselves
hold there.
"""
import ctypes
import errno
import fcntl
import mmap
import os
import socket
import stat
import sys
import threading
import time

libc = ctypes.CDLL(None, use_errno=True)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
AT_FDCWD = -100


def renameat2(old, new, flags):
    if libc.renameat2(AT_FDCWD, old.encode(), AT_FDCWD, new.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def expect_errno(code, fn, *args):
    try:
        fn(*args)
    except OSError as e:
        assert e.errno == code, f"expected {errno.errorcode[code]}, got {errno.errorcode.get(e.errno, e.errno)}"
        return
    raise AssertionError(f"expected {errno.errorcode[code]}, the call succeeded")


def write(path, data, mode="wb"):
    with open(path, mode) as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def check_renames(d):
    write(f"{d}/a", b"A")
    write(f"{d}/b", b"B")
    expect_errno(errno.EEXIST, renameat2, f"{d}/a", f"{d}/b", RENAME_NOREPLACE)
    renameat2(f"{d}/a", f"{d}/b", RENAME_EXCHANGE)
    assert read(f"{d}/a") == b"B" and read(f"{d}/b") == b"A"
    os.makedirs(f"{d}/x/y")
    os.rename(f"{d}/x", f"{d}/z")  # a directory across the tree
    assert os.path.isdir(f"{d}/z/y")
    expect_errno(errno.EINVAL, os.rename, f"{d}/z", f"{d}/z/y/inside")
    os.rename(f"{d}/a", f"{d}/z/y/a")
    assert read(f"{d}/z/y/a") == b"B"


def check_links_and_inodes(d):
    write(f"{d}/f", b"data")
    ino = os.stat(f"{d}/f").st_ino
    os.link(f"{d}/f", f"{d}/g")
    assert os.stat(f"{d}/g").st_ino == ino and os.stat(f"{d}/f").st_nlink == 2
    write(f"{d}/g", b"more", "ab")
    assert read(f"{d}/f") == b"datamore"
    os.rename(f"{d}/f", f"{d}/h")
    assert os.stat(f"{d}/h").st_ino == ino, "inode numbers stay stable across a rename"
    os.symlink("h", f"{d}/s")
    assert os.readlink(f"{d}/s") == "h" and read(f"{d}/s") == b"datamore"
    expect_errno(errno.EPERM, os.link, d, f"{d}/dirlink")


def check_attributes(d):
    write(f"{d}/f", b"x")
    os.chmod(f"{d}/f", 0o751)
    assert stat.S_IMODE(os.stat(f"{d}/f").st_mode) == 0o751
    os.chown(f"{d}/f", 1234, 4321)
    st = os.stat(f"{d}/f")
    assert (st.st_uid, st.st_gid) == (1234, 4321)
    os.utime(f"{d}/f", ns=(1_000_000_123, 2_000_000_456))
    assert os.stat(f"{d}/f").st_mtime_ns == 2_000_000_456
    os.mkdir(f"{d}/sg")
    os.chown(f"{d}/sg", 0, 4242)
    os.chmod(f"{d}/sg", 0o2775)
    write(f"{d}/sg/child", b"")
    os.mkdir(f"{d}/sg/subdir")
    assert os.stat(f"{d}/sg/child").st_gid == 4242, "setgid directories pass their group on"
    assert os.stat(f"{d}/sg/subdir").st_mode & stat.S_ISGID, "and their setgid bit to directories"
    os.truncate(f"{d}/f", 10)
    assert read(f"{d}/f") == b"x" + b"\0" * 9
    os.truncate(f"{d}/f", 0)
    assert read(f"{d}/f") == b""
    before = os.stat(f"{d}/f").st_ctime_ns
    time.sleep(0.02)
    os.chown(f"{d}/f", -1, -1)
    assert os.stat(f"{d}/f").st_ctime_ns > before, "chown(-1, -1) moves ctime, as on ext4"


def check_append_fsync_fallocate(d):
    fd = os.open(f"{d}/log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, b"one\n")
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, b"two\n")
    os.fsync(fd)
    os.fdatasync(fd)
    os.close(fd)
    assert read(f"{d}/log") == b"one\ntwo\n"
    fd = os.open(f"{d}/alloc", os.O_RDWR | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, 1 << 20)
    os.close(fd)
    assert os.stat(f"{d}/alloc").st_size == 1 << 20


def check_mmap(d):
    write(f"{d}/m", b"\0" * 8192)
    with open(f"{d}/m", "r+b") as f:
        m = mmap.mmap(f.fileno(), 8192)  # shared, writable
        m[100:105] = b"hello"
        m.flush()
        m.close()
    assert read(f"{d}/m")[100:105] == b"hello"


def check_sparse_large(d):
    size = 5 << 30  # past 4 GiB
    with open(f"{d}/sparse", "wb") as f:
        f.truncate(size)
        f.seek(size - 3)
        f.write(b"end")
    st = os.stat(f"{d}/sparse")
    assert st.st_size == size
    assert st.st_blocks * 512 < (64 << 20), "a sparse file stays sparse"
    # The block count of a closed file: what its data holds, after a write and a truncate.
    with open(f"{d}/dense", "wb") as f:
        f.write(b"x" * (1 << 20))
    assert os.stat(f"{d}/dense").st_blocks * 512 >= 1 << 20
    os.truncate(f"{d}/dense", 0)
    assert os.stat(f"{d}/dense").st_blocks == 0
    os.unlink(f"{d}/dense")
    with open(f"{d}/sparse", "rb") as f:
        f.seek(size - 3)
        assert f.read() == b"end"
        f.seek(4 << 30)
        assert f.read(16) == b"\0" * 16


def check_many_open_files(d):
    fds = [os.open(f"{d}/f{i}", os.O_RDWR | os.O_CREAT, 0o644) for i in range(300)]
    for i, fd in enumerate(fds):
        os.write(fd, str(i).encode())
    for fd in fds:
        os.close(fd)
    assert all(read(f"{d}/f{i}") == str(i).encode() for i in range(300))


def check_concurrent_writers(d):
    fd = os.open(f"{d}/shared", os.O_RDWR | os.O_CREAT, 0o644)

    def writer(k):
        for i in range(200):
            os.pwrite(fd, bytes([65 + k]) * 64, (i * 4 + k) * 64)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    os.close(fd)
    data = read(f"{d}/shared")
    assert len(data) == 200 * 4 * 64
    for i in range(800):
        assert data[i * 64:(i + 1) * 64] == bytes([65 + i % 4]) * 64


def check_locks(d):
    write(f"{d}/lock", b"")
    a = open(f"{d}/lock", "r+b")
    b = open(f"{d}/lock", "r+b")
    fcntl.flock(a, fcntl.LOCK_EX)
    expect_errno(errno.EWOULDBLOCK, fcntl.flock, b, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fcntl.flock(a, fcntl.LOCK_UN)
    fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fcntl.flock(b, fcntl.LOCK_UN)
    pid = os.fork()
    if pid == 0:  # a POSIX lock is per process: hold one in a child
        fcntl.lockf(b, fcntl.LOCK_EX)
        os.write(1, b"")
        import time
        time.sleep(1)
        os._exit(0)
    import time
    time.sleep(0.3)
    expect_errno(errno.EAGAIN, fcntl.lockf, a, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.waitpid(pid, 0)
    fcntl.lockf(a, fcntl.LOCK_EX | fcntl.LOCK_NB)
    a.close()
    b.close()


def check_fifo_socket_device(d):
    os.mkfifo(f"{d}/fifo")
    pid = os.fork()
    if pid == 0:
        write(f"{d}/fifo", b"through the fifo")
        os._exit(0)
    assert read(f"{d}/fifo") == b"through the fifo"
    os.waitpid(pid, 0)
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(f"{d}/sock")
    srv.listen(1)
    cli = socket.socket(socket.AF_UNIX)
    cli.connect(f"{d}/sock")
    conn, _ = srv.accept()
    cli.sendall(b"ping")
    assert conn.recv(4) == b"ping"
    for s in (conn, cli, srv):
        s.close()
    if WORKSPACE:
        expect_errno(errno.EPERM, os.mknod, f"{d}/dev", stat.S_IFCHR | 0o600, os.makedev(1, 3))


def check_xattrs(d):
    write(f"{d}/x", b"")
    os.setxattr(f"{d}/x", "user.colour", b"blue")
    assert os.getxattr(f"{d}/x", "user.colour") == b"blue"
    assert "user.colour" in os.listxattr(f"{d}/x")
    os.removexattr(f"{d}/x", "user.colour")
    expect_errno(errno.ENODATA, os.getxattr, f"{d}/x", "user.colour")


def check_names_and_statfs(d):
    expect_errno(errno.ENAMETOOLONG, write, f"{d}/{'n' * 256}", b"")
    write(f"{d}/{'n' * 255}", b"ok")
    os.mkdir(f"{d}/sub")
    write(f"{d}/sub/../via-dotdot", b"dots")  # '..' resolves inside the Workspace
    assert read(f"{d}/via-dotdot") == b"dots"
    expect_errno(errno.ENOTEMPTY, os.rmdir, d)
    st = os.statvfs(d)
    assert st.f_bsize > 0 and st.f_blocks > 0


def check_unlinked_but_referenced(d):
    # A file without a name keeps its data while something still reaches it (an O_PATH
    # fd, reopened through /proc), and can even be changed, as on a local disk.
    write(f"{d}/v", b"hello")
    fd = os.open(f"{d}/v", os.O_PATH)
    try:
        os.unlink(f"{d}/v")
        assert read(f"/proc/self/fd/{fd}") == b"hello"
        os.truncate(f"/proc/self/fd/{fd}", 50)
        assert read(f"/proc/self/fd/{fd}") == b"hello" + b"\0" * 45
    finally:
        os.close(fd)


CHECKS = [check_renames, check_links_and_inodes, check_attributes, check_append_fsync_fallocate,
          check_mmap, check_sparse_large, check_many_open_files, check_concurrent_writers, check_locks,
          check_fifo_socket_device, check_xattrs, check_names_and_statfs, check_unlinked_but_referenced]


WORKSPACE = False


def main():
    global WORKSPACE
    args = sys.argv[1:]
    if args[:1] == ["--workspace"]:
        WORKSPACE = True
        args = args[1:]
    if len(args) != 1 or not os.path.isdir(args[0]):
        print(__doc__, file=sys.stderr)
        return 2
    failed = 0
    for check in CHECKS:
        d = os.path.join(args[0], check.__name__)
        os.mkdir(d)
        try:
            check(d)
            print(f"ok   {check.__name__}")
        except Exception as e:  # report every check, then fail
            failed += 1
            print(f"FAIL {check.__name__}: {type(e).__name__}: {e}")
    print(f"posix: {len(CHECKS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
