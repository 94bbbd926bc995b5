"""The oracle of equiv_f1: run two sides of a step in a real bash and compare what they did.

Each side's units are typed as the lines of one bash script (a terminal does not stop when a
command fails), run in a fresh scratch directory holding the same starting tree, with HOME inside
it, stdin closed (a prompting `rm -i` reads end-of-file and answers no), a timeout, and only
harmless commands in the corpus (no network). Two sides are equivalent when, on every starting
tree, they give the same exit status, the same stdout, the same working directory afterwards
and the same resulting tree (paths, kinds, contents).

    PYTHONPATH=. python tests/scoring/equiv_oracle.py   # how the rules of the lab on sys.path fare
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import yaml

from tests.paths import REPO

CORPUS = REPO / "tests" / "data" / "equiv_oracle.yaml"
TIMEOUT_S = 10
WORK, HOME = "work", "home"  # the step's cwd and $HOME, inside the scratch root
# starting trees: "full" has every directory; "bare" lacks build/ and sub/, so a `cd` can fail
SETUP = {
    "full": """
mkdir -p work/build work/sub home/proj
printf 'alpha\\nbeta\\n' > work/a.txt
printf 'bravo bravo bravo\\n' > work/b.txt
seq 1 40 > work/big.txt
printf '10\\n9\\n100\\n' > work/nums.txt
printf 'obj\\n' > work/build/x.o; printf 'o\\n' > work/build/y.o
printf 'note\\n' > work/sub/n.txt
mkdir -p pack/d && printf 'packed\\n' > pack/d/e.txt
touch -d '2020-01-01 00:00:00' pack/d/e.txt pack/d
tar -czf work/archive.tgz -C pack d && rm -rf pack
printf 'home\\n' > home/notes.txt
touch -d '2021-01-01 00:00:01' work/a.txt; touch -d '2021-01-01 00:00:03' work/b.txt
touch -d '2021-01-01 00:00:02' work/big.txt work/nums.txt work/archive.tgz
touch -d '2021-01-01 00:00:04' work/build/x.o work/build/y.o work/sub/n.txt work/build work/sub
""",
}
SETUP["bare"] = SETUP["full"] + "rm -rf work/build work/sub\n"
# Every directory's time is fixed last: `ls -la` shows `.` and `..`, made at the moment each side runs; two sides
# run a minute apart (a loaded machine, or a minute boundary between them) would otherwise differ by the clock.
PIN_TIMES = "touch -d '2021-01-01 00:00:05' . work home home/proj\n"
SETUP = {tree: script + PIN_TIMES for tree, script in SETUP.items()}
# after the typed lines: the last status and where the session now is, on a line of their own
EPILOGUE = '\n__status=$?\nprintf "\\n<status=%s pwd=%s>\\n" "$__status" "$PWD"\nexit 0\n'
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC", "TERM": "dumb"}


def _tree(root: Path) -> tuple[tuple[str, str], ...]:
    """(relative path, kind and content hash) of everything under root, sorted."""
    out = []
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out.append((rel, "link:" + os.readlink(path)))
        elif path.is_dir():
            out.append((rel, "dir"))
        else:
            out.append((rel, "file:" + hashlib.sha256(path.read_bytes()).hexdigest()))
    return tuple(out)


def run_side(units: tuple[str, ...], tree: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(stdout with the final status and cwd, resulting tree) of typing `units` into bash on `tree`."""
    with tempfile.TemporaryDirectory(prefix="equiv-oracle-") as tmp:
        root = Path(tmp)
        env = {**ENV, "HOME": str(root / HOME)}
        subprocess.run(["bash", "--noprofile", "--norc", "-e", "-c", SETUP[tree]], cwd=root, env=env, check=True)
        script = Path(tempfile.mkdtemp(prefix="equiv-oracle-script-")) / "side.sh"
        script.write_text("\n".join(units) + EPILOGUE, encoding="utf-8")
        try:
            done = subprocess.run(["bash", "--noprofile", "--norc", str(script)], cwd=root / WORK, env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT_S,
                                  start_new_session=True)
            stdout = done.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            stdout = "<timeout>"
        finally:
            script.unlink()
            script.parent.rmdir()
        return stdout.replace(tmp, "<root>"), _tree(root)


@lru_cache(maxsize=None)
def _side(units: tuple[str, ...], tree: str) -> tuple:
    return run_side(units, tree)


def shell_equivalent(ref: list[str], pred: list[str]) -> bool:
    """Whether the two sides do the same on every starting tree (exit status, stdout, cwd, tree)."""
    return all(_side(tuple(ref), tree) == _side(tuple(pred), tree) for tree in SETUP)


def load_corpus(path: Path = CORPUS) -> list[dict]:
    """The oracle's pairs: {ref, pred, equivalent, note?}."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))["pairs"]


CONTEXT = (f"/scratch/{WORK}", f"/scratch/{HOME}")  # the same string on both sides: a placeholder


def rules_claim(ref: list[str], pred: list[str]) -> bool:
    """Whether the lab's equiv rules write the two sides alike (normalised units equal, in the cwd
    and HOME the shell used): what equiv_f1 adds to the harness's own token F1."""
    from lab.scoring.equiv import EquivContext, normalise_units
    from lab.scoring.tokens import normalize_unit

    context = EquivContext(*CONTEXT)
    return ([normalize_unit(u) for u in normalise_units(ref, context)]
            == [normalize_unit(u) for u in normalise_units(pred, context)])


def equiv_f1_is_one(ref: list[str], pred: list[str]) -> bool:
    """Whether equiv_f1 is 1 (the rules' claim, or the harness's token F1 already 1: it lower-cases
    and drops quotes, so `ls -a`/`ls -A` and `ls *.txt`/`ls '*.txt'` score 1 before any rule)."""
    from lab.scoring.equiv import EquivContext, equiv_step

    return equiv_step(pred, ref, EquivContext(*CONTEXT)).metrics.f1 == 1.0


def harness_full_match(ref: list[str], pred: list[str]) -> bool:
    """Whether the published harness's own token F1 is already 1 (equiv_f1 keeps it: equiv >= F1)."""
    from lab.scoring import score_units

    return score_units(pred, ref).f1 == 1.0


def wrong_claims(pairs: list[dict]) -> list[dict]:
    """The pairs the rules write alike and the shell does not run alike."""
    return [p for p in pairs if rules_claim(p["ref"], p["pred"]) and not shell_equivalent(p["ref"], p["pred"])]


def report() -> str:
    """How the rules in use fare on the corpus (run with the lab to judge on sys.path)."""
    pairs = load_corpus()
    same = [shell_equivalent(p["ref"], p["pred"]) for p in pairs]
    claims = [rules_claim(p["ref"], p["pred"]) for p in pairs]
    ones = [equiv_f1_is_one(p["ref"], p["pred"]) for p in pairs]
    lines = [f"{len(pairs)} pairs, {sum(same)} equivalent in bash, {len(pairs) - sum(same)} not; "
             f"rules write {sum(claims)} alike, {sum(c and not s for c, s in zip(claims, same))} of them wrongly; "
             f"equiv_f1 = 1 on {sum(ones)}, {sum(o and not s for o, s in zip(ones, same))} wrongly; "
             f"equivalent pairs the rules miss: {sum(s and not c for c, s in zip(claims, same))}"]
    for p, s, c, o in zip(pairs, same, claims, ones):
        if not s and (c or o):
            lines.append(f"  {'rules' if c else 'harness F1'} wrong: {p['ref']} vs {p['pred']}")
    for p, s, c in zip(pairs, same, claims):
        if s and not c:
            lines.append(f"  missed: {p['ref']} vs {p['pred']}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
