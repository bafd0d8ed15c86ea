#!/usr/bin/python3
"""Stalls a write into a Workspace file, run by test_passthrough_stalled_write.sh.

Run in a user and mount namespace of its own (unshare -Urm), as a command of a Sandbox
whose /dev/fuse it can open. Mounts a FUSE server at MOUNTPOINT holding one file, "x"
(4 KiB), that answers everything but READ; a child maps x (not read yet) and writes
that mapping into TARGET, a Workspace file open for writing (passed through). The
write faults on the mapping inside the kernel's write, after ext4 took TARGET's upper
file's inode lock and moved its ctime, and waits for a READ never answered.
Writes READY_FILE when the write is about to start.
"""
import ctypes
import mmap
import os
import struct
import sys
import time

INIT, LOOKUP, GETATTR, OPEN, READ, RELEASE = 26, 1, 3, 14, 15, 18


def attr(ino, mode, size):
    # fuse_attr: ino size blocks atime mtime ctime (u64), atimensec mtimensec ctimensec
    # mode nlink uid gid rdev blksize flags (u32)
    return struct.pack("<QQQQQQIIIIIIIIII", ino, size, 8, 0, 0, 0, 0, 0, 0, mode, 1, 0, 0, 0, 4096, 0)


def main():
    mountpoint, target, ready_file = sys.argv[1], sys.argv[2], sys.argv[3]
    fd = os.open("/dev/fuse", os.O_RDWR)
    libc = ctypes.CDLL(None, use_errno=True)
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
    if libc.mount(b"stall", mountpoint.encode(), b"fuse.stall", 0, opts) != 0:
        sys.exit(f"mount: {os.strerror(ctypes.get_errno())}")
    out = open(target, "r+b", buffering=0)  # before the fork: the child writes through it
    if os.fork() == 0:
        os.close(fd)
        src = os.open(os.path.join(mountpoint, "x"), os.O_RDONLY)
        m = mmap.mmap(src, 4096, mmap.MAP_PRIVATE, mmap.PROT_READ)
        with open(ready_file + ".tmp", "w") as f:
            f.write("writing\n")
        os.rename(ready_file + ".tmp", ready_file)
        os.pwrite(out.fileno(), m, 0)
        os._exit(0)
    out.close()
    while True:
        buf = os.read(fd, 1 << 20)
        _, opcode, unique, nodeid = struct.unpack_from("<IIQQ", buf)
        if opcode == INIT:
            body = struct.pack("<IIIIHHIIHHII24x", 7, 31, 0, 0, 0, 0, 4096, 0, 0, 0, 0, 0)
        elif opcode == LOOKUP and buf[40:].split(b"\0")[0] == b"x":
            body = struct.pack("<QQQQII", 2, 0, 3600, 3600, 0, 0) + attr(2, 0o100644, 4096)
        elif opcode == GETATTR:
            body = struct.pack("<QII", 3600, 0, 0) + (attr(1, 0o40755, 0) if nodeid == 1 else attr(2, 0o100644, 4096))
        elif opcode == OPEN:
            body = struct.pack("<QIi", 1, 0, 0)
        elif opcode == RELEASE:
            body = b""
        elif opcode == READ:
            continue  # never answered
        else:
            os.write(fd, struct.pack("<IiQ", 16, -38, unique))  # ENOSYS
            continue
        os.write(fd, struct.pack("<IiQ", 16 + len(body), 0, unique) + body)


if __name__ == "__main__":
    main()
