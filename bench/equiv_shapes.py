"""The costliest command-unit shapes for equiv_f1 found so far (issue 40's flag letters and the
rest): each builds one side of a step, `count` distinct units of about `length` characters, so no
cache helps. Used by bench/bench_equiv_worst.py and tests/scoring/test_equiv_cost.py."""
from __future__ import annotations

from typing import Callable


def _fill(head: str, piece: str, length: int, tail: str = "") -> str:
    """`head` then `piece` repeated to about `length` characters in all, then `tail`."""
    room = max(0, length - len(head) - len(tail))
    return head + (piece * (room // max(1, len(piece)) + 1))[:room] + tail


def _salted(make: Callable[[int, int], str]) -> Callable[[int, int], list[str]]:
    def side(count: int, length: int) -> list[str]:
        return [make(i, length) for i in range(count)]

    side.__doc__ = make.__doc__
    return side


# name -> side(count, length); `i` makes each unit distinct (the caches key on the text)
SHAPES: dict[str, Callable[[int, int], list[str]]] = {
    "ls flag letters": _salted(lambda i, n: _fill(f"ls -{'ahk'[i % 3]}", "l", n)),
    "ls mixed letters": _salted(lambda i, n: _fill(f"ls -{'ah'[i % 2]}", "lagonhk1tSUXvcuFpbNQqLH", n)),
    "rm conflicting letters": _salted(lambda i, n: _fill(f"rm -{'rv'[i % 2]}", "fiI", n)),
    "grep conflict groups": _salted(lambda i, n: _fill(f"grep -{'ab'[i % 2]}", "clLqhHrRaIEFGP", n, " x")),
    "tar old-style letters": _salted(lambda i, n: _fill(f"tar {'xc'[i % 2]}", "zvjJ", n)),
    "ls digit flags": _salted(lambda i, n: _fill(f"ls -{'ah'[i % 2]}", "1", n)),
    "many options": _salted(lambda i, n: _fill(f"ls -{'ah'[i % 2]}", " -l -a -h -t", n)),
    "value options": _salted(lambda i, n: _fill(f"head -{'qv'[i % 2]}", " -n5 -c7", n)),
    "quoted options": _salted(lambda i, n: _fill(f"ls '-{'ah'[i % 2]}'", " '-l'", n)),
    "quoted words": _salted(lambda i, n: _fill(f"cat 'f{i}'", " 'a' \"b\"", n)),
    "quoted && chain": _salted(lambda i, n: _fill(f"ls '-{'ah'[i % 2]}'", " && ls '-la'", n)),
    "plain ; chain": _salted(lambda i, n: _fill(f"ls -{'ah'[i % 2]}", " ; ls -la", n)),
    "cd chain": _salted(lambda i, n: _fill(f"cd d{i}", " ; cd a", n)),
    "cd units": _salted(lambda i, n: _fill(f"cd d{i}/", "a/", n)),
    "double-quoted variables": _salted(lambda i, n: _fill(f'echo "{i}', "$a", n, '"')),
    "newline escapes": _salted(lambda i, n: _fill(f"ls {i}", "\\n", n)),
    "nested substitutions": _salted(lambda i, n: "echo " + "$(" * (n // 4) + str(i) + ")" * (n // 4)),
    "apostrophes in quotes": _salted(lambda i, n: _fill(f'echo "{i}', "'", n, '"')),
}
