#!/usr/bin/env python3
"""XOR two files byte by byte (the longer input's extra bytes are kept as they are).

Usage: xor.py A B OUT   -- OUT = A xor B, length of A. This is the delta the
peers that cannot take a reference are given, so they compete on the same input.
"""
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    a = open(sys.argv[1], "rb").read()
    b = open(sys.argv[2], "rb").read()
    n = min(len(a), len(b))
    x = (int.from_bytes(a[:n], "little") ^ int.from_bytes(b[:n], "little")).to_bytes(n, "little")
    with open(sys.argv[3], "wb") as f:
        f.write(x + a[n:])


if __name__ == "__main__":
    main()
