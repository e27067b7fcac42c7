"""The ccol exceptions ccol.torch makes in Python, with `code` and
`status` set as libccol's own carry them, so a failure found in Python
(bad bytes from a rank, ranks at different points, a deadline) reads like
one libccol found."""

import ccol

# status name -> ccol_status int, as libccol numbers them
_STATUS = {ccol.status_name(s): s for s in range(-32, 1)}


def error(cls, code, msg):
    """A ccol exception made in Python, with `code` and `status` set as
    libccol's own carry them."""
    e = cls(msg)
    e.code, e.status = code, _STATUS.get(code, -1)
    e.ccol_message = msg
    return e


def peer_error(msg):
    return error(ccol.PeerError, "PEER", msg)


def diverged_error(msg):
    return error(ccol.DivergedError, "DIVERGED", msg)


def timeout_error(msg):
    return error(ccol.TimeoutError, "TIMEOUT", msg)
