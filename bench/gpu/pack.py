"""Make the GPU proof's payload for a GPU machine without network, in .gpu/ (git-ignored): two pieces of at most
64 MiB each together with the working tree, for machines that take files in pieces of that size.

    python bench/gpu/pack.py            # needs the package index; about 2 minutes on 2 cores

  .gpu/a   the wheels the GPU image lacks (bench/gpu/packages.yaml, image_packages.txt), vLLM 0.25.1's Python
           files without its large kernels, FlashAttention 3's kernels (xz), bench/gpu/setup.sh
  .gpu/b   vLLM's main kernels (xz), the models (bench/gpu/models.py), the 303-step replay
           (bench/scale_replay.py --distinct, xz), bench/gpu/run.sh

Then copy this checkout with .gpu/a and .gpu/b to the GPU machine and, in the checkout there, run

    bash .gpu/a/setup.sh                                   # installs vLLM into /root/site
    bash .gpu/b/run.sh [bench/gpu/proof.py options]        # the proof; its figures and logs land in $OUT

(docs/gpu.md: the same proof on a GPU machine with network, without this payload).
"""
from __future__ import annotations

import json
import lzma
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / ".gpu"
PLATFORM = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"] + [
    x for tag in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_26_x86_64", "manylinux_2_24_x86_64",
                  "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64", "any")
    for x in ("--platform", tag)]
LIMIT = 64 * 2**20


def name_of(requirement: str) -> str:
    """`fastapi[standard]<0.137.0,>=0.133.0` -> `fastapi`, normalised (PEP 503)."""
    return canonicalize_name(Requirement(requirement).name)


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args, "-q"], check=True)


def wheel_requirements(wheel: Path) -> list[str]:
    """A wheel's unconditional `Requires-Dist` (no extras), markers dropped."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    return [line.split(":", 1)[1].split(";")[0].strip() for line in lines
            if line.startswith("Requires-Dist:") and "extra ==" not in line]


def missing_wheels(wanted: list[str], have: set[str], drop: set[str], work: Path) -> list[Path]:
    """Resolve `wanted` for the GPU machine's Python and download what it lacks, one version each."""
    report = work / "report.json"
    pip("install", "--dry-run", "--ignore-installed", "--report", str(report), "--target", str(work / "x"),
        *PLATFORM, *wanted)
    urls = [item["download_info"]["url"] for item in json.loads(report.read_text())["install"]
            if name_of(item["metadata"]["name"]) not in have | drop
            and not name_of(item["metadata"]["name"]).startswith("nvidia-")]
    wheels = work / "wheels"
    pip("download", "--no-deps", *PLATFORM, "-d", str(wheels), *urls)
    return sorted(wheels.glob("*.whl"))


def xz(source: Path, target: Path) -> None:
    with source.open("rb") as f, lzma.open(target, "wb", preset=6) as out:
        shutil.copyfileobj(f, out, 2**22)


def main() -> None:
    spec = yaml.safe_load((HERE / "packages.yaml").read_text())
    lines = (HERE / "image_packages.txt").read_text().splitlines()
    have = {name_of(n) for line in lines if not line.startswith("#") for n in line.split()}
    shutil.rmtree(OUT / "a", ignore_errors=True)
    shutil.rmtree(OUT / "b", ignore_errors=True)
    a, b = OUT / "a", OUT / "b"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="gpu-pack-") as tmp:
        work = Path(tmp)
        pip("download", "--no-deps", *PLATFORM, "-d", str(work / "vllm"), spec["vllm"])
        vllm_wheel = next((work / "vllm").glob("vllm-*.whl"))
        leave = {name_of(n) for n in spec["leave_out"]}
        wanted = [spec["replace"].get(name_of(r), r) for r in wheel_requirements(vllm_wheel) if name_of(r) not in leave]
        for wheel in missing_wheels(wanted + spec["also"], have, {name_of(n) for n in spec["drop"]}, work):
            shutil.copy(wheel, a)
        tree = work / "tree"
        with zipfile.ZipFile(vllm_wheel) as z:
            z.extractall(tree)
        for path in spec["strip"]:
            target = tree / path
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        for piece, path in spec["kernels"].items():
            xz(tree / path, OUT / piece / (Path(path).name + ".xz"))
            (tree / path).unlink()
        with tarfile.open(a / "vllm-py.tar.xz", "w:xz") as tar:
            for top in sorted(tree.iterdir()):
                tar.add(top, arcname=top.name)
    subprocess.run([sys.executable, str(HERE / "models.py"), "--out", str(b / "models")], check=True)
    replay = OUT / "replay_scaled.jsonl"
    subprocess.run([sys.executable, str(ROOT / "bench" / "scale_replay.py"), "--distinct", "--out", str(replay)],
                   check=True)
    xz(replay, b / "replay_scaled.jsonl.xz")
    shutil.copy(HERE / "setup.sh", a)
    shutil.copy(HERE / "run.sh", b)
    tracked = sum((ROOT / p).stat().st_size for p in subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True).stdout.split()
        if (ROOT / p).is_file())
    for piece in (a, b):
        size = sum(p.stat().st_size for p in piece.rglob("*") if p.is_file()) + tracked
        print(f"{piece.relative_to(ROOT)}: {size / 2**20:.1f} MiB with the working tree (limit 64)")
        if size > LIMIT:
            sys.exit(f"{piece}: over 64 MiB with the working tree; carry less")


if __name__ == "__main__":
    main()
