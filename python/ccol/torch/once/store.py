"""The job compile store: one directory per job that outlives its runs.

What a job learned while it compiled (the profile: which dims became
dynamic, per frame; compile once's artifacts, per graph) is kept in
DIR/NAME (docs/store.md), so a restart at any world size, on any hosts,
starts from it. This module is the directory and its files: names,
checks, atomic writes. The profile's meaning is once/profile.py; how
the ranks agree on what they load is once/decide.py (artifacts) and
_store_profile.agree (the profile).

Everything read from the store is untrusted: each file is checked by the
store's checks (store/checks.c through the extension's store_check, the
checks `ccol store check` runs: one implementation of each format)
before it is read, and one that does not check out is a WARNING naming
it and what is wrong; the job compiles as if the store did not have it.
The directory must belong to this user and be writable by no one else,
and so must every ancestor but root's and sticky ones (a store others
can write decides what code every rank loads): the store is opened once,
component by component, and every later read and write goes through its
descriptors (_safe_path.py); each file read must be this user's alone.
With CCOL_TOKEN every file carries an HMAC under it and a file without a
valid one is refused.
"""

import hashlib
import hmac
import json
import os
import re
import secrets

import ccol
from ccol import _ccol

from .. import _env, _safe_path
from . import files as files_, isa as _once_isa
from .._log import log

FORMAT = "ccol-job-store"
VERSION = 1
PROFILE_FORMAT = "ccol-profile"
MAX_PROFILE = 1 << 20          # bytes of one profile file
MAX_ARTIFACT = files_.MAX_SHARE + files_.MAX_HEADER + 64


class Bad(Exception):
    """A store file that does not check out (the message says why)."""


def job_name(given=None):
    """The job's name: enable(job_name=...), CCOL_TORCH_JOB_NAME, torch's
    job_id, else "default"; a name docs/store.md does not allow is a
    ValueError (enable()'s) or ccol.InvalidError (the variable's)."""
    if given is not None:
        if not isinstance(given, str) or not _env._JOB_NAME.match(given):
            raise ValueError(f"job_name={given!r:.80} is not a job name: use "
                             "1 to 128 characters of A-Z a-z 0-9 . _ -, not "
                             "starting with a dot")
        return given
    env = _env.job_name_env()
    if env:
        return env
    try:
        import torch.compiler.config as cc
        jid = cc.job_id
    except Exception:  # noqa: BLE001 - a torch without it
        jid = None
    if jid and _env._JOB_NAME.match(str(jid)):
        return str(jid)
    if jid:
        log.warning("ccol.torch: torch's job_id %r is not a job store name "
                    "(A-Z a-z 0-9 . _ -): the job store uses \"default\"; "
                    "set CCOL_TORCH_JOB_NAME", str(jid)[:80])
    return "default"


def versions():
    import torch
    return {"torch": str(torch.__version__), "ccol": ccol.__version__}


def frame_id(file_hash, line, name):
    """A frame's file name in profile/ (docs/store.md): its identity
    without the closure (closures of one function share an entry)."""
    return _ccol.store_frame_id(_utf8(file_hash), line, _utf8(name))


def artifact_id(key):
    """An artifact's file name in artifacts/ for a cache key."""
    return _ccol.store_key_id(_utf8(key))


def _utf8(text):
    return text.encode("utf-8", "surrogatepass")


class Store:
    """DIR/NAME, opened by open(); `ok` is False once it is found unusable
    (said once at WARNING), and the job then compiles as without it."""

    def __init__(self, directory, name, token=None, where="job_dir"):
        self.where = where  # what named the directory, for messages
        self.dir = os.path.abspath(directory)
        self.name = name
        self.root = os.path.join(self.dir, name)
        self.token = token.encode() if token else None
        self.run = secrets.token_hex(8)  # this run, in what it writes
        self.ok = True
        self.warned = set()
        self.fds = {}  # "root", "profile", "artifacts": open descriptors

    # ---- the directory ---------------------------------------------------

    def open(self, create):
        """Checks the store (creating it when `create`: the writer) and
        keeps its directories open; False, said once, when it cannot be
        used."""
        if "root" in self.fds:  # opened already (once/frames.py, at wrap)
            return self.ok
        try:
            d = _safe_path.open_dir(self.dir, create)
            try:
                self.fds["root"] = _safe_path.open_own(d, self.name,
                                                       self.root, create)
            finally:
                os.close(d)
            self._store_json(create)
            for sub in ("profile", "artifacts"):
                self._sub(sub, create)
        except (OSError, Bad, _safe_path.Unsafe) as e:
            self.unusable(f"{type(e).__name__}: {e}" if isinstance(e, OSError)
                          else str(e))
        return self.ok

    def _sub(self, sub, create=False):
        """The descriptor of profile/ or artifacts/ (None while a reader's
        store has none yet)."""
        if sub not in self.fds:
            try:
                self.fds[sub] = _safe_path.open_own(
                    self.fds["root"], sub, os.path.join(self.root, sub),
                    create)
            except FileNotFoundError:
                return None
        return self.fds[sub]

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit
            pass

    def _store_json(self, create):
        path = os.path.join(self.root, "store.json")
        root = self.fds["root"]
        want = {"format": FORMAT, "version": VERSION, "job": self.name}
        if create and not _exists(root, "store.json"):
            _safe_path.write_at(root, "store.json",
                                json.dumps(want).encode() + b"\n",
                                replace=False)
        data = read_file(root, "store.json", path, 4096)
        why = _ccol.store_check("meta", None, data)
        if why is not None:
            raise Bad(f"{path}: {why}")
        got = json.loads(data)
        if got.get("job") != self.name:
            raise Bad(f"{path} names job {got.get('job')!r:.80}, not "
                      f"{self.name!r}")

    def unusable(self, why):
        if self.ok:
            log.warning("ccol.torch: the job store %s (%s) is not used: %s; "
                        "every graph is compiled as without it", self.root,
                        self.where, why)
        self.ok = False

    def warn(self, what, why):
        """A store file that does not check out: WARNING the first time per
        file, INFO after."""
        level = log.info if what in self.warned else log.warning
        self.warned.add(what)
        level("ccol.torch: the job store's %s is not used: %s; compiled as "
              "without it", what, why)

    def concurrent(self, run, what):
        """Another run wrote `what` while this one runs: said once at
        WARNING (both runs' entries are joined; artifacts are written once
        and never replaced, so nothing is lost or mixed)."""
        if "concurrent" in self.warned:
            return
        self.warned.add("concurrent")
        log.warning("ccol.torch: the job store %s: another run (%.40s) "
                    "wrote %s while this one (%s) runs: two jobs of the "
                    "same name? Their profiles are joined; give each job "
                    "its own name (CCOL_TORCH_JOB_NAME) to keep them apart",
                    self.root, str(run), what, self.run)

    # ---- signing ---------------------------------------------------------

    def mac(self, data):
        if self.token is None:
            return None
        return hmac.new(self.token, data, hashlib.sha256).hexdigest()

    def check_mac(self, given, data):
        if self.token is None:
            return
        if not isinstance(given, str) or not hmac.compare_digest(
                given, self.mac(data)):
            raise Bad("its HMAC under CCOL_TOKEN is missing or wrong (written "
                      "by another job, without the token, or altered)")

    def check_versions(self, got):
        mine = versions()
        for k in ("torch", "ccol"):
            if got.get(k) != mine[k]:
                raise Bad(f"written by {k} {got.get(k)!r:.40}, this rank runs "
                          f"{k} {mine[k]}")

    # ---- profile files ---------------------------------------------------

    def profile_path(self, fid):
        return os.path.join(self.root, "profile", fid + ".json")

    def read_profiles(self):
        """{frame id: the file's bytes} of every profile file that can be
        read (unreadable ones said at WARNING); checked by the reader."""
        out = {}
        try:
            fd = self._sub("profile")
            names = sorted(os.listdir(fd)) if fd is not None else []
        except OSError as e:
            self.warn("profile directory", f"{type(e).__name__}: {e}")
            return out
        for n in names:
            fid = n[:-5] if n.endswith(".json") else None
            if fid is None or not re.fullmatch(r"[0-9a-f]{32}", fid):
                continue  # temporaries and strangers: not ours to judge
            try:
                out[fid] = self.read_profile(fid)
            except (OSError, Bad) as e:
                self.warn(f"profile/{n}", str(e))
        return out

    def read_profile(self, fid):
        """One profile file's bytes (OSError, Bad)."""
        fd = self._sub("profile")
        if fd is None:
            raise FileNotFoundError(self.profile_path(fid))
        return read_file(fd, fid + ".json", self.profile_path(fid),
                         MAX_PROFILE)

    def seal_profile(self, body):
        head = {"format": PROFILE_FORMAT, "version": VERSION,
                "length": len(body), "sha256": hashlib.sha256(body).hexdigest(),
                "mac": self.mac(body)}
        return json.dumps(head).encode() + b"\n" + body

    def open_profile(self, fid, data):
        """The body (a dict) of the bytes of profile/FID.json; Bad when the
        store's checks refuse them (header, length, digest, body, entries,
        the ID), or the HMAC or versions do not check out."""
        why = _ccol.store_check("profile", fid, data)
        if why is not None:
            raise Bad(why)
        nl = data.find(b"\n")
        head = json.loads(data[:nl])
        self.check_mac(head.get("mac"), data[nl + 1:])
        got = json.loads(data[nl + 1:])
        self.check_versions(got)
        return got

    def write_profile(self, fid, body):
        _safe_path.write_at(self._sub("profile", create=True), fid + ".json",
                            self.seal_profile(body))

    # ---- artifacts -------------------------------------------------------

    def artifact_path(self, key):
        return os.path.join(self.root, "artifacts",
                            artifact_id(key) + ".ccolonce")

    def read_artifact(self, key):
        """The checked compile_once message for key (bytes), or None (a
        missing file; a bad one said at WARNING)."""
        path = self.artifact_path(key)
        rel = os.path.relpath(path, self.root)
        try:
            fd = self._sub("artifacts")
            if fd is None:
                return None
            blob = read_file(fd, os.path.basename(path), path, MAX_ARTIFACT)
            why = _ccol.store_check("artifact", artifact_id(key), blob)
            if why is not None:
                raise Bad(why)
            head, _ = files_.header(blob)
            if head["key"] != key:
                raise Bad("the artifact is for another cache key")
            self.check_versions(head)
            self.check_mac(head.get("mac"), _artifact_signed(head))
        except FileNotFoundError:
            return None
        except (OSError, Bad) as e:
            self.warn(rel, str(e))
            return None
        return blob

    def opened(self, create):
        """The store open (opening it now if need be); False when it cannot
        be used."""
        return self.ok and self.open(create)

    def write_artifact(self, key, files, compile_s, extra=None,
                       replace=False):
        """Keeps one compile's files in the store (the owner, once per
        graph; `replace` for an entry that grows, a frame's package);
        `extra` adds header fields, under the MAC like the rest. A failure
        is a WARNING, never the compile's."""
        extra = dict(extra or {}, **versions(), run=self.run,
                     **_once_isa.header())
        extra["mac"] = None
        blob = files_.pack(key, files, None, compile_s, extra=extra)
        if self.token is not None:  # the MAC covers the header as read
            extra["mac"] = self.mac(_artifact_signed(files_.header(blob)[0]))
            blob = files_.pack(key, files, None, compile_s, extra=extra)
        try:
            fd = self._sub("artifacts", create=True)
            if not _safe_path.write_at(fd, artifact_id(key) + ".ccolonce",
                                       blob, replace=replace):
                log.info("ccol.torch: the job store has %s already (another "
                         "run kept it)", artifact_id(key))
                return False
        except OSError as e:
            self.warn("artifacts directory", f"writing {artifact_id(key)} "
                      f"failed: {type(e).__name__}: {e}")
            return False
        return True


def _artifact_signed(head):
    """What an artifact's MAC covers: its whole header but the MAC, in one
    canonical form (keys sorted, no spaces, ASCII): the body's SHA-256,
    the key, every file's name, length and digest, compile_s, the versions,
    the run and the probe answers (once/isa.py). A header rewritten in
    any field, the same bytes under other names included, fails it."""
    signed = {k: v for k, v in head.items() if k != "mac"}
    return json.dumps(signed, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True).encode()


def read_file(dfd, name, path, limit):
    """A store file's bytes (`name` inside the directory dfd, shown as
    `path`), at most `limit`: a regular file of this user's alone, never
    through a link; Bad otherwise, OSError when it cannot be read."""
    try:
        return _safe_path.read_at(dfd, name, path, limit)
    except _safe_path.Unsafe as e:
        raise Bad(str(e)) from None


def _exists(dfd, name):
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def from_settings(job_dir=None, job_name_=None):
    """The Store the settings ask for (enable()'s arguments, else
    CCOL_TORCH_JOB_DIR and the name's sources), or None."""
    d = job_dir if job_dir is not None else \
        os.environ.get("CCOL_TORCH_JOB_DIR", "")
    if not d:
        _env.job_name_env()  # checked even while the store is off
        return None
    if not isinstance(d, (str, os.PathLike)):
        raise TypeError(f"job_dir must be a path, not {type(d).__name__}")
    where = "job_dir" if job_dir is not None else "CCOL_TORCH_JOB_DIR"
    d = os.fspath(d)
    if "\0" in d:
        raise ValueError(f"{where} holds a NUL character")
    return Store(d, job_name(job_name_),
                 token=os.environ.get("CCOL_TOKEN") or None, where=where)
