#!/usr/bin/python3
"""A FUSE server that never answers, run by test_fuse_trap.sh inside a Sandbox.

Run in a user and mount namespace of its own (unshare -Urm): it opens /dev/fuse, mounts
it at MOUNTPOINT, answers INIT, then forks a child that keeps the /dev/fuse descriptor and
looks a name up in the mount; the server reads that request and never answers it. Once
the child has been sent SIGKILL it waits for the answer in uninterruptible sleep (the
request was read), and since it holds the connection's last descriptor itself, nothing
ends the connection but an abort: cgroup.kill alone cannot empty the Sandbox's cgroup.
Writes READY_FILE when the trap is set.
"""
import ctypes
import os
import struct
import sys
import time

FUSE_INIT = 26


def main():
    mountpoint, ready_file = sys.argv[1], sys.argv[2]
    fd = os.open("/dev/fuse", os.O_RDWR)
    libc = ctypes.CDLL(None, use_errno=True)
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
    if libc.mount(b"trap", mountpoint.encode(), b"fuse.trap", 0, opts) != 0:
        err = ctypes.get_errno()
        sys.exit(f"mount: {os.strerror(err)}")
    buf = os.read(fd, 1 << 20)
    _, opcode, unique = struct.unpack_from("<IIQ", buf)
    if opcode != FUSE_INIT:
        sys.exit(f"expected INIT, got opcode {opcode}")
    # fuse_init_out: major, minor, max_readahead, flags, max_background,
    # congestion_threshold, max_write, time_gran, max_pages, map_alignment, flags2,
    # max_stack_depth, unused[6]
    init = struct.pack("<IIIIHHIIHHII24x", 7, 31, 0, 0, 0, 0, 4096, 0, 0, 0, 0, 0)
    os.write(fd, struct.pack("<IiQ", 16 + len(init), 0, unique) + init)
    if os.fork() == 0:
        # The child keeps fd (inherited) and blocks on the server's silence.
        try:
            os.stat(os.path.join(mountpoint, "never-answered"))
        finally:
            os._exit(0)
    os.read(fd, 1 << 20)  # the child's lookup: read, never answered
    with open(ready_file, "w") as f:
        f.write("set\n")
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
