#!/usr/bin/env python3
"""Writes the named seeds of the frame and shm fuzz corpora.

The frame layout is that of src/comm/comm.h (protocol version 4): a 72-byte
header, then the payload, then the sender's label, with the label length at
byte 14 and one CRC-32C over the body. Run from the repository root after a
change to the layout; the seeds named by the fuzzers themselves (hashes)
are left alone.
"""

import os
import struct

VERSION = 4
MAGIC = 0x4C4F4343
K_UP, K_ABORT = 1, 4
OP_ALLGATHERV, OP_ALLREDUCE_I64, OP_BARRIER = 1, 3, 6


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_T = _table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = _T[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def frame(kind=K_UP, op=OP_BARRIER, payload=b"", label=b"", seq=1,
          frm=1, version=VERSION, label_len=None, body_crc=None):
    """A frame; label_len and body_crc may lie (the header crc is right)."""
    n = len(label) if label_len is None else label_len
    pcrc = crc32c(label, crc32c(payload)) if body_crc is None else body_crc
    h = struct.pack("<IHHIHHQQQQqIII", MAGIC, version, kind, frm, op, n, 0,
                    0, seq, 0, 0, len(payload), pcrc, 0)
    h += struct.pack("<I", crc32c(h))
    assert len(h) == 72
    return h + payload + label


def label200(tag):
    head = b"exchange for compile 1 of torch_dynamo_resume_in_f_at_12 " + tag
    return head + b"x" * (200 - len(head))


def frame_seeds():
    err = struct.pack("<i", -3) + b"barrier #1 timed out"
    return {
        "up_barrier": frame(),
        "up_payload": frame(op=OP_ALLGATHERV,
                            payload=struct.pack("<II", 1, 3) + b"abc"),
        "abort": frame(kind=K_ABORT, payload=err),
        "bad_version": frame(version=9),
        "truncated": frame()[:50],
        "oversized": oversized(frame()),
        "label_whole": frame(label=label200(b"(up)")),
        "label_payload": frame(op=OP_ALLGATHERV, payload=b"\x01\x00\x00\x00"
                               b"\x02\x00\x00\x00hi", label=b"step 7"),
        "label_max": frame(label=b"L" * 512),
        "label_control_chars": frame(label=b"a\nb\x01c\x7fd\xc3\xa9"),
        "label_nul_inside": frame(label=b"abc\x00def"),
        "label_oversized": frame(label=b"L" * 513),
        "label_len_lies": frame(label=b"short", label_len=400),
        "label_bad_crc": frame(label=label200(b"(bad)"), body_crc=1),
        "abort_labeled": frame(kind=K_ABORT, payload=err,
                               label=label200(b"(abort)")),
    }


def tag_seeds():
    """Whole frames to tag, each followed by the byte that picks which
    byte to flip (its value modulo the frame length)."""
    up = frame(op=OP_ALLGATHERV, payload=struct.pack("<II", 1, 3) + b"abc",
               label=b"step 7")
    return {
        "tag_barrier": frame() + b"\x05",
        "tag_payload_byte": up + bytes([(72 + 4) % len(up)]),
        "tag_label_byte": up + bytes([(len(up) - 1) % 256]),
        "tag_token_field": frame() + b"\x11",
    }


def oversized(f):
    """A header announcing a 4 GiB payload, its checksum fixed up."""
    h = bytearray(f[:72])
    struct.pack_into("<I", h, 56, 0xFFFFFFFF)
    struct.pack_into("<I", h, 68, crc32c(bytes(h[:68])))
    return bytes(h)


SLOT_CAP, LABEL_MAX, SLOT_BIG = 1024, 512, 1


def sealed_slot(op, payload=b"", label=b"", flags=0, length=None, arg=0,
                seq=3):
    """A whole slot image (src/comm/slots.h, segment version 5 on) published as
    operation seq, sealed as its writer does: CRC-32C of bytes 0-31 (seq,
    little-endian as in the word, then arg, started, op, flags, len) and
    the payload (the label is not covered), stored at byte 32."""
    n = len(payload) if length is None else length
    s = bytearray(64 + LABEL_MAX + SLOT_CAP)
    struct.pack_into("<QQqHHI", s, 0, seq, arg, 0, op, flags, n)
    s[64:64 + len(label)] = label
    s[64 + LABEL_MAX:64 + LABEL_MAX + len(payload)] = payload
    crc = crc32c(bytes(s[0:32]))
    if not flags & SLOT_BIG:
        crc = crc32c(bytes(s[64 + LABEL_MAX:64 + LABEL_MAX +
                             min(n, SLOT_CAP)]), crc)
    struct.pack_into("<I", s, 32, crc)
    return s


def shm_seeds():
    sealed = sealed_slot(OP_ALLREDUCE_I64, struct.pack("<q", 42), b"step 7",
                  arg=(1 << 48) | 1)
    scribbled = bytearray(sealed)
    scribbled[64 + LABEL_MAX] ^= 1  # a payload byte after sealing
    moved = bytearray(sealed)
    struct.pack_into("<Q", moved, 0, 5)  # seq moved on by an outsider
    stream = frame(label=label200(b"(ring)")) + frame(
        op=OP_ALLGATHERV, payload=b"\x00" * 8, label=b"step 7", seq=2)
    slot = bytearray(64 + 512 + 16)
    struct.pack_into("<QQqHHI", slot, 0, 3, 0, 0, OP_BARRIER, 0, 0)
    slot[64:64 + 300] = b"S" * 300
    full = bytearray(slot)
    full[64:64 + 512] = b"F\n" * 256  # no NUL: the field is full
    start = (2**64 - 100).to_bytes(8, "little")
    return {
        "ring_labeled": bytes([0, 0]) + bytes(8) + stream,
        "ring_labeled_chunks_wrap": bytes([37, 0]) + start + stream,
        "ring_label_oversized": bytes([0, 0]) + bytes(8) + frame(
            label=b"L" * 513),
        "slot_long_label": bytes(slot),
        "slot_full_label": bytes(full),
        "slot_sealed": bytes(sealed),
        "slot_sealed_scribbled": bytes(scribbled),
        "slot_sealed_seq_moved": bytes(moved),
        "slot_sealed_big": bytes(sealed_slot(
            OP_ALLGATHERV, b"", b"x" * LABEL_MAX, flags=SLOT_BIG,
            length=1 << 20)),
        "slot_sealed_overlong": bytes(sealed_slot(
            OP_BARRIER, b"", b"", length=SLOT_CAP + 1)),
    }


def host_seeds():
    """Host tables of rank 0's WELCOME (src/comm/hostplan.c), after the byte
    that picks the world size (1 + b % 12) and threshold (1 + b / 12 % 8):
    u32 host count, u32 host per rank, u32-length nonce."""
    def table(hosts, nonce=b"0123456789abcdef"):
        body = struct.pack("<I", len(set(hosts)))
        body += b"".join(struct.pack("<I", h) for h in hosts)
        return body + struct.pack("<I", len(nonce)) + nonce
    size5 = bytes([4 + 12 * 7])  # 5 ranks, threshold 8
    return {
        "hosts_flat": size5 + struct.pack("<I", 0),
        "hosts_two_by_two": bytes([3 + 12 * 7]) + table([0, 0, 1, 1]),
        "hosts_uneven": size5 + table([0, 0, 0, 1, 2]),
        "hosts_split": size5 + table([0, 1, 0, 2, 2]),
        "hosts_out_of_order": size5 + table([0, 2, 1, 1, 0]),
        "hosts_bad_nonce": size5 + table([0, 0, 1, 1, 1], b"XYZ"),
    }


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    for name, data in host_seeds().items():
        with open(os.path.join(root, "fuzz_frame", name), "wb") as f:
            f.write(b"\x02" + data)  # byte 0 == 2: the host table
    for name, data in frame_seeds().items():
        with open(os.path.join(root, "fuzz_frame", name), "wb") as f:
            f.write(b"\x00" + data)  # byte 0 even: the header decoder
    for name, data in tag_seeds().items():
        with open(os.path.join(root, "fuzz_frame", name), "wb") as f:
            f.write(b"\x04" + data)  # byte 0 == 4: the frame tag
    for name, data in shm_seeds().items():
        with open(os.path.join(root, "fuzz_shm", name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
