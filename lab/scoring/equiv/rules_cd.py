"""The `cd` rule: targets resolved against the working directory, tracked along the units."""
from __future__ import annotations

import posixpath
import re
import shlex

from lab.scoring.equiv.registry import EquivContext, EquivTooLarge, EquivUnit, Params, connector_of, sequence_rule
from lab.scoring.equiv.shell import parse_unit, plain_words, simple_command, source_of


DIR_CHANGERS = ("cd", "pushd", "popd")
HOME_RX = re.compile(r'cd\s+(?P<q>"?)\$(?:HOME|\{HOME\})(?P<rest>/[A-Za-z0-9@%+=:,./_-]*)?(?P=q)\s*$')


def changes_dir(text: str) -> bool:
    """Whether a unit may change the directory (its first word is cd/pushd/popd)."""
    words = text.split(None, 1)
    return bool(words) and words[0] in DIR_CHANGERS


def cd_target(text: str) -> tuple[bool, str | None]:
    """(is a plain `cd` command, its target as written or None for a bare `cd`).

    Targets with expansions other than a leading `~` (`cd $DIR`, `cd "$(…)"`) are not plain.
    """
    if not text.startswith("cd"):  # spare the parser
        return False, None
    home = HOME_RX.match(text)
    if home:  # `cd $HOME/x` is `cd ~/x`: tilde expansion reads $HOME too
        return True, "~" + (home.group("rest") or "")
    words = plain_words(text)
    if words is not None:  # no shell grammar in it
        return (True, words[1] if len(words) == 2 else None) if words[0] == "cd" and len(words) <= 2 else (False, None)
    command = simple_command(parse_unit(text))
    if command is None or command.parts[0].word != "cd" or len(command.parts) > 2:
        return False, None
    if len(command.parts) == 1:
        return True, None
    word = command.parts[1]
    kinds = {p.kind for p in (getattr(word, "parts", None) or [])}
    if kinds - {"tilde"} or (kinds and not source_of(text, word).startswith("~")):
        return False, None
    return True, word.word


def resolve_dir(target: str | None, cwd: str | None, home: str | None) -> str | None:
    """The absolute directory `cd target` lands in, or None when it cannot be known."""
    if target is None or target == "~":
        return home
    if target.startswith("~/"):
        return posixpath.normpath(posixpath.join(home, target[2:])) if home else None
    if target == "-" or target.startswith("~"):
        return None
    if target.startswith("/"):
        return posixpath.normpath(target)
    if cwd is None:
        return None
    return posixpath.normpath(posixpath.join(cwd, target))


@sequence_rule("cd")
def cd(units: list[EquivUnit], context: EquivContext, params: Params) -> list[EquivUnit]:
    """`cd myproject` in /app is `cd /app/myproject`; later units see the new directory.

    Each resolved target is as long as the directory: `cd a; cd a; …` writes ever longer paths, so
    the resolved characters are counted against `context.max_resolved_chars` as they grow (EquivTooLarge)."""
    out: list[EquivUnit] = []
    cwd = context.cwd
    written = 0
    for unit in units:
        prefix = "" if unit.literal else connector_of(unit.text)
        text = unit.text[len(prefix):]
        is_cd, target = (False, None) if unit.literal else cd_target(text)
        if not is_cd:
            if not unit.literal and changes_dir(text):
                cwd = None  # `cd $DIR`, `pushd x`: from here on the directory is unknown
            out.append(unit)
            continue
        resolved = resolve_dir(target, cwd, context.home)
        if resolved is not None and target != "-":
            written += len(resolved)
            if context.max_resolved_chars is not None and written > context.max_resolved_chars:
                raise EquivTooLarge(f"cd targets resolve to {written:,}+ characters; at most "
                                    f"{context.max_resolved_chars:,}")
            out.append(unit.with_text(prefix + "cd " + shlex.quote(resolved)))
        elif target is not None and target.startswith("~") and target != text[3:].strip():
            out.append(unit.with_text(prefix + "cd " + target))  # `cd $HOME/x` -> `cd ~/x`
        else:
            out.append(unit)
        # after `a && cd x` the directory depends on whether `a` succeeded
        cwd = None if prefix else resolved
    return out
