"""torch's store, with every value the job writes sealed under its token.

After the join (job/join.py), the job keeps meeting through torch's store:
the compile meetings and their news (_board.py, job/meet.py), the heartbeats
and published failures (_live.py), the pipeline stages (job/stages.py).
Anything that reaches MASTER_PORT can write there, so when the job has a
token every value it writes carries an HMAC-SHA-256 under that token over
the key and the value, and every value it reads must carry a valid one:
a value a process outside the job wrote (or moved from another key) is a
ccol.PeerError naming the key, never a decision taken on it. Counters
(add) cannot carry one: what they count is read through sealed keys.
Without a token the store is used as it is (it is then the job's trust
root, as job/join.py warns).
"""

import hashlib
import hmac

from .._log import peer_error

_TAG = b"\n#ccol-hmac:"


class Sealed:
    """A store (torch's, through _exit.Guarded) whose set, get, multi_get
    and compare_set seal and check values; every other call is the
    store's own."""

    __slots__ = ("store", "_key")

    def __init__(self, store, token):
        self.store = store
        self._key = token.encode()

    def __getattr__(self, name):
        return getattr(self.store, name)

    def _mac(self, key, value):
        return hmac.new(self._key, key.encode() + b"\0" + value,
                        hashlib.sha256).hexdigest().encode()

    def _seal(self, key, value):
        value = value.encode() if isinstance(value, str) else bytes(value)
        return value + _TAG + self._mac(key, value)

    def _open(self, key, raw):
        raw = raw.encode() if isinstance(raw, str) else bytes(raw)
        value, tag, mac = raw.rpartition(_TAG)
        if not tag or not hmac.compare_digest(mac, self._mac(key, value)):
            raise peer_error(
                f"torch's store holds a value under {key[:200]} that no "
                "rank of this job wrote (its HMAC under the job token is "
                "missing or wrong): a process outside the job wrote into "
                "the store; the job is refused")
        return value

    def set(self, key, value):
        return self.store.set(key, self._seal(key, value))

    def get(self, key):
        return self._open(key, self.store.get(key))

    def multi_get(self, keys):
        return [self._open(k, v)
                for k, v in zip(keys, self.store.multi_get(keys))]

    def compare_set(self, key, expected, desired):
        """Only "written once" is used: expected is empty (no value), and
        desired is text (torch's compare_set takes str)."""
        if expected not in ("", b""):
            raise ValueError("Sealed.compare_set takes an empty expected")
        got = self.store.compare_set(key, "",
                                     self._seal(key, desired).decode())
        return self._open(key, got)


def wrap(store, token):
    """store sealed under token, or store itself without a token."""
    return store if token is None or store is None else Sealed(store, token)
