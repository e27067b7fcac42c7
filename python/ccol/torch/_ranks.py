"""How ccol.torch names sets of job ranks: in messages ("0, 1" or
"0-7") and as a hash (a domain's sub-communicator name, a meeting's key).
"""


def ranks_text(members):
    """'0, 1' or '0-7' for a run of ranks."""
    m = list(members)
    if len(m) > 2 and m == list(range(m[0], m[-1] + 1)):
        return f"{m[0]}-{m[-1]}"
    return ", ".join(map(str, m))


def hash_members(members):
    """FNV-1a over ranks (4 bytes each) or over bytes."""
    h = 0xcbf29ce484222325
    data = members if isinstance(members, bytes) else b"".join(
        int(r).to_bytes(4, "little") for r in members)
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h
