"""One file of a published npm package, for tests that run Flowise's own clients
(the chat widget, `flowise-sdk`): packed once with `npm pack`, checked against the
digest pinned in the test, and kept under tests/.cache."""

import hashlib
import subprocess
import tarfile
from pathlib import Path

CACHE = Path(__file__).resolve().parent.parent / ".cache"


def npm_file(package: str, sha256: str, member: str) -> Path:
    """`member` (a path inside the package, `dist/web.js`) of `package`
    (`name@version`), whose tarball must have the digest `sha256`."""
    name = Path(member).name
    target = CACHE / package.replace("@", "-") / name
    if not target.exists():
        CACHE.mkdir(exist_ok=True)
        packed = subprocess.run(["npm", "pack", package, "--silent", "--pack-destination", str(CACHE)],
                                check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        tarball = CACHE / packed
        digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
        assert digest == sha256, f"{package} is not the package pinned here (sha256 {digest})"
        with tarfile.open(tarball) as tar:
            source = tar.extractfile(f"package/{member}")
            assert source is not None, f"{package} has no {member}"
            target.parent.mkdir(exist_ok=True)
            target.write_bytes(source.read())
        tarball.unlink()
    return target


def npm_installed(package: str) -> Path:
    """`package` (`name@version`, pinned) installed with its dependencies under
    tests/.cache (once, with npm and its registry's integrity checks): the
    package's own directory."""
    target = CACHE / ("npm-" + package.replace("@", "-").replace("/", "-"))
    done = target / ".installed"
    if not done.exists():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(target), package],
                       check=True, capture_output=True, text=True, timeout=600)
        done.write_text(package)
    return target / "node_modules" / package.rsplit("@", 1)[0]


def npm_prefix(name: str, *packages: str) -> Path:
    """`packages` (`name@version`, pinned) installed together with their
    dependencies into one prefix under tests/.cache (once): the prefix, laid out as
    `PY_TOOL_NODE_PACKAGES` takes it (`<prefix>/node_modules/<package>`)."""
    target = CACHE / f"npm-prefix-{name}"
    done = target / ".installed"
    wanted = "\n".join(sorted(packages))
    if not done.exists() or done.read_text() != wanted:
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(target), *packages],
                       check=True, capture_output=True, text=True, timeout=600)
        done.write_text(wanted)
    return target


def npm_folder(package: str, sha256: str, folder: str) -> Path:
    """Every file under `folder` (a path inside the package, `marketplaces`) of
    `package` (`name@version`), whose tarball must have the digest `sha256`,
    unpacked once under tests/.cache: the folder."""
    target = CACHE / package.replace("@", "-") / folder
    done = target / ".unpacked"
    if not done.exists():
        CACHE.mkdir(exist_ok=True)
        packed = subprocess.run(["npm", "pack", package, "--silent", "--pack-destination", str(CACHE)],
                                check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        tarball = CACHE / packed
        digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
        assert digest == sha256, f"{package} is not the package pinned here (sha256 {digest})"
        prefix = f"package/{folder}/"
        with tarfile.open(tarball) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.startswith(prefix) and ".." not in member.name:
                    source = tar.extractfile(member)
                    assert source is not None, member.name
                    out = target / member.name[len(prefix):]
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(source.read())
        tarball.unlink()
        done.write_text(package)
    return target
