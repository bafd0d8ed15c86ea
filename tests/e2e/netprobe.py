#!/usr/bin/env python3
"""A listener and a client for the network tests (test_network.sh, test_network_isolation.sh).

netprobe.py serve ADDRESS PORT MARKER
    listens on ADDRESS:PORT (PORT 0: one the kernel picks), prints the port once it
    listens, then answers every connection with MARKER and a newline, until killed.
netprobe.py probe ADDRESS PORT [SECONDS]
    connects (at most SECONDS, default 5) and prints what the listener said; exits 1 and
    prints 'error: NAME' (ECONNREFUSED, ENETUNREACH, timeout...) when it cannot.
"""
import errno
import socket
import sys


def serve(address, port, marker):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((address, int(port)))
    s.listen(16)
    print(s.getsockname()[1], flush=True)
    while True:
        c, _ = s.accept()
        try:
            c.sendall((marker + "\n").encode())
        except OSError:
            pass
        c.close()


def probe(address, port, seconds="5"):
    try:
        c = socket.create_connection((address, int(port)), timeout=float(seconds))
        data = c.recv(200)
        c.close()
    except socket.timeout:
        print("error: timeout")
        return 1
    except OSError as e:
        print("error: " + (errno.errorcode.get(e.errno, str(e.errno)) if e.errno else str(e)))
        return 1
    print(data.decode(errors="replace").strip())
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "serve":
        serve(*sys.argv[2:5])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "probe":
        sys.exit(probe(*sys.argv[2:]))
    else:
        sys.exit(__doc__)
