"""equiv_f1: every rule on its own, the issue's examples, and the harness F1 left untouched."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.data import load_replay
from lab.errors import LabError
from lab.scoring import score_batch, score_units
from lab.scoring.equiv import (
    CHAIN_PART,
    EQUIVALENT,
    RULES,
    EquivContext,
    equiv_batch,
    equiv_step,
    load_config,
    normalise_units,
    pair_kind,
    parse_config,
    prompt_in,
    step_context,
)
from lab.scoring.equiv.heredoc import heredoc_delimiter, literal_flags
from lab.scoring.equiv.registry import EquivUnit
from tests.paths import EXCERPT, GOLDEN

APP = EquivContext(cwd="/app", home="/root")


def run_rule(name: str, text: str) -> list[str]:
    return RULES[name].fn(text, load_config().params_of(name))


# ---------------------------------------------------------------- the rules file


def test_rules_file_names_registered_rules_in_order():
    config = load_config()
    assert config.pipeline == ("trailing_newlines", "keystrokes", "whitespace", "split_chains", "quoting", "flags", "cd")
    assert all(name in RULES for name in config.pipeline)
    assert "ls" in config.params_of("flags")["commands"] and "chmod" not in config.params_of("flags")["commands"]


def test_unknown_rule_or_missing_file_is_a_clear_error(tmp_path, monkeypatch):
    with pytest.raises(LabError, match="unknown equiv rule.*nope"):
        parse_config({"pipeline": ["whitespace", "nope"]}, "mine.yaml")
    with pytest.raises(LabError, match="needs a 'pipeline'"):
        parse_config({"rules": []}, "mine.yaml")
    monkeypatch.setenv("LAB_EQUIV_RULES", str(tmp_path / "missing.yaml"))
    with pytest.raises(LabError, match="no such equiv rules file"):
        load_config()


def test_a_user_rules_file_extends_the_flag_commands(tmp_path, monkeypatch):
    text = (load_config().path and open(load_config().path, encoding="utf-8").read())
    mine = tmp_path / "rules.yaml"
    mine.write_text(text.replace("    ss: {value_flags: \"fAF\"}", "    ss: {value_flags: \"fAF\"}\n    lsof: {value_flags: \"p\"}"))
    assert normalise_units(["lsof -n -i"]) == ["lsof -n -i"]
    monkeypatch.setenv("LAB_EQUIV_RULES", str(mine))
    assert normalise_units(["lsof -n -i"]) == ["lsof -in"]


# ---------------------------------------------------------------- one test per rule


def test_trailing_newlines():
    assert run_rule("trailing_newlines", "ls -la\\n") == ["ls -la"]
    assert run_rule("trailing_newlines", "ls -la\\r\\n  ") == ["ls -la"]
    assert run_rule("trailing_newlines", "\\n") == ["<WAIT>"]
    assert run_rule("trailing_newlines", "printf 'a\\nb'") == ["printf 'a\\nb'"]


def test_keystrokes():
    for spelling in ("^C", "Ctrl-C", "ctrl+c", "C-C", "c-c", "\\x03", "\x03"):
        assert run_rule("keystrokes", spelling) == ["C-c"], spelling
    assert run_rule("keystrokes", "C-d") == ["C-d"]
    assert run_rule("keystrokes", "C-cat") == ["C-cat"]
    assert run_rule("keystrokes", "ls") == ["ls"]


def test_whitespace():
    assert run_rule("whitespace", "  ls   -la\t/app ") == ["ls -la /app"]
    assert run_rule("whitespace", "   ") == ["<WAIT>"]


def test_split_chains():
    # `&&`'s right side keeps its connector: `a && b` is not `a; b` when `a` can fail
    assert run_rule("split_chains", "cd /app && make") == ["cd /app", "&& make"]
    assert run_rule("split_chains", "cd /app; make") == ["cd /app", "make"]
    assert run_rule("split_chains", "a && b; c") == ["a", "&& b", "c"]
    assert run_rule("split_chains", "cd /app; make;") == ["cd /app", "make"]
    assert run_rule("split_chains", "make || echo failed") == ["make || echo failed"]
    assert run_rule("split_chains", "cd /app && make || true") == ["cd /app && make || true"]
    assert run_rule("split_chains", "ps aux | grep x") == ["ps aux | grep x"]
    assert run_rule("split_chains", "echo 'a && b'") == ["echo 'a && b'"]
    # a heredoc opener still splits (its body lines are separate units)
    assert run_rule("split_chains", "cd /app && cat > f << 'EOF'") == ["cd /app", "&& cat > f << 'EOF'"]
    # what bashlex cannot parse is left as it is
    assert run_rule("split_chains", "echo $((1+2)) && ls") == ["echo $((1+2)) && ls"]


def test_quoting():
    assert run_rule("quoting", "cat 'notes.txt'") == ["cat notes.txt"]
    assert run_rule("quoting", 'cat "notes.txt"') == ["cat notes.txt"]
    assert run_rule("quoting", 'echo "a b"') == ["echo 'a b'"]
    assert run_rule("quoting", "echo a\\ b") == ["echo 'a b'"]
    # quotes that change meaning stay: a quoted glob is not a glob, "$HOME" expands
    assert run_rule("quoting", "ls '*.py'") == ["ls '*.py'"]
    assert run_rule("quoting", "ls *.py") == ["ls *.py"]
    assert run_rule("quoting", 'echo "$HOME"') == ['echo "$HOME"']


def test_flags():
    assert run_rule("flags", "ls -la") == ["ls -al"]
    assert run_rule("flags", "ls -l -a /tmp") == ["ls -al /tmp"]
    assert run_rule("flags", "ls /tmp -a -l") == ["ls -al /tmp"]
    assert run_rule("flags", "grep -n -i foo file | sort -r") == ["grep -in foo file | sort -r"]
    assert run_rule("flags", "grep -n -i 'foo bar' file | sort -r") == ["grep -in 'foo bar' file | sort -r"]
    assert run_rule("flags", "tail -n 5 -f log") == ["tail -f -n 5 log"]
    assert run_rule("flags", "tail -n5 log") == run_rule("flags", "tail -n 5 log") == ["tail -n 5 log"]
    assert run_rule("flags", "tar -xzvf a.tgz") == ["tar -xvz -f a.tgz"]
    assert run_rule("flags", "tar xzvf a.tgz") == ["tar -xvz -f a.tgz"]  # old-style bundle
    assert run_rule("flags", "tar xfz a.tgz") == ["tar xfz a.tgz"]  # -xfz would read `z` as the file
    # conflicting letters keep their order (the last one wins): rm -if deletes, rm -fi prompts
    assert run_rule("flags", "rm -i -f x") == ["rm -if x"] != run_rule("flags", "rm -f -i x")
    assert run_rule("flags", "ls -S -l -t") == ["ls -lSt"] != run_rule("flags", "ls -t -l -S")
    # letters of one group that commute after all (`commute`): -1 has no effect after -l, -h wins over -k
    assert run_rule("flags", "ls -l -1") == run_rule("flags", "ls -1 -l") == ["ls -1l"]
    assert run_rule("flags", "ls -s -h -k x") == run_rule("flags", "ls -k -s -h x") == ["ls -hks x"]
    assert run_rule("flags", "cp -n -f a b") == run_rule("flags", "cp -fn a b") == ["cp -fn a b"]
    assert run_rule("flags", "cp -n -i a b") != run_rule("flags", "cp -i -n a b")  # a prompt or none
    assert run_rule("flags", "ls -1 -C") != run_rule("flags", "ls -C -1")  # -1 and -C: the last wins
    assert run_rule("flags", "ls -l -C -1") != run_rule("flags", "ls -1 -C -l")
    assert run_rule("flags", "grep -c -l x f") == run_rule("flags", "grep -l -c x f") == ["grep -cl x f"]
    assert run_rule("flags", "grep -l -L x f") != run_rule("flags", "grep -L -l x f")
    # `-DIGITS` first is the count of head and tail (anywhere else it is not)
    assert run_rule("flags", "head -5 f") == run_rule("flags", "head -n 5 f") == ["head -n 5 f"]
    assert run_rule("flags", "tail -12 f") == ["tail -n 12 f"]
    assert run_rule("flags", "head -n 3 -5 f") != run_rule("flags", "head -n 3 -n 5 f")
    assert run_rule("flags", "ls -5") == ["ls -5"]
    # a conflicting letter never moves past a long option
    assert run_rule("flags", "ls -t --sort=size") == ["ls -t --sort=size"]
    assert run_rule("flags", "rm -rf -- -x") == ["rm -fr -- -x"]
    # not listed (chmod -x is a mode, find -name an expression) or no short flags
    assert run_rule("flags", "chmod -x run.sh") == ["chmod -x run.sh"]
    assert run_rule("flags", "find . -name x") == ["find . -name x"]
    assert run_rule("flags", "ls --all") == ["ls --all"]


def test_cd_resolves_against_the_cwd_and_tracks_it():
    cd = RULES["cd"].fn
    units = [EquivUnit(i, t) for i, t in enumerate(["cd myproject", "cd ../build/", "cd ~", "cd ~/x", "cd $D", "cd y"])]
    out = [u.text for u in cd(units, APP, {})]
    assert out == ["cd /app/myproject", "cd /app/build", "cd /root", "cd /root/x", "cd $D", "cd y"]
    unknown = [u.text for u in cd([EquivUnit(0, "cd src"), EquivUnit(1, "cd /opt"), EquivUnit(2, "cd lib")], EquivContext(), {})]
    assert unknown == ["cd src", "cd /opt", "cd /opt/lib"]
    literal = cd([EquivUnit(0, "cd x", literal=True)], APP, {})
    assert literal[0].text == "cd x"


def test_heredoc_bodies_are_left_alone():
    assert heredoc_delimiter("cat > f << 'EOF'") == "EOF"
    assert heredoc_delimiter("cat <<-END > f") == "END"
    assert heredoc_delimiter('echo "<<"') is None
    units = ["cat > run.sh << 'EOF'", "cd sub && ls -la", "EOF", "ls -la"]
    assert literal_flags(units) == [False, True, False, False]
    assert normalise_units(units, APP) == ["cat > run.sh << 'EOF'", "cd sub && ls -la", "EOF", "ls -al"]


def test_cwd_from_the_terminal_screen():
    assert prompt_in("...\nroot@box-7:/app/myproject# ") == ("root", "/app/myproject")
    assert prompt_in('cmd: "rm -f *.o"root@box-7:/app#') == ("root", "/app")
    assert prompt_in("no prompt here") is None
    steps = load_replay(str(EXCERPT)).by_key
    assert step_context(steps["task-000/0"]).cwd == "/app"
    assert step_context(steps["task-000/1"]).cwd == "/app/myproject"
    assert step_context(steps["task-000/2"]).cwd == "/app/output"
    # the last message is an error note with no prompt: the newest screen that has one counts
    assert step_context(steps["task-000/4"]).cwd is not None


# ---------------------------------------------------------------- the issue's examples


def test_issue_examples():
    cd = equiv_step(["cd /app/myproject"], ["cd myproject"], APP)
    assert score_units(["cd /app/myproject"], ["cd myproject"]).f1 == 0.5 and cd.metrics.f1 == 1.0
    assert cd.pair(["cd /app/myproject"], ["cd myproject"], 0, 0) == EQUIVALENT
    flags = equiv_step(["ls -la"], ["ls -al"], APP)
    assert score_units(["ls -la"], ["ls -al"]).f1 == 0.5 and flags.metrics.f1 == 1.0
    chain = equiv_step(["a; b"], ["a", "b"], APP)
    assert chain.metrics.f1 == 1.0 > score_units(["a; b"], ["a", "b"]).f1
    assert [chain.pair(["a; b"], ["a", "b"], 0, j) for j in (0, 1)] == [CHAIN_PART, CHAIN_PART]
    assert equiv_step(["a && b"], ["a", "b"], APP).metrics.f1 < 1.0


def test_pair_kind():
    assert pair_kind("ls -la", "ls -la", ("ls -al",), ("ls -al",)) is None  # equal, not just equivalent
    assert pair_kind("ls -la", "ls -al", ("ls -al",), ("ls -al",)) == EQUIVALENT
    assert pair_kind("ls", "pwd", ("ls",), ("pwd",)) is None


# ---------------------------------------------------------------- the harness F1 stays as published


def _golden_rows():
    return [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_equiv_never_changes_the_harness_numbers_and_never_scores_lower():
    rows = _golden_rows()
    pairs = [(r["pred_command_units"], r["ref_command_units"]) for r in rows]
    scorer = ["legacy" if r["scoring_version"] == "legacy_386" else "corrected" for r in rows]
    before = [score_units(p, r, s) for (p, r), s in zip(pairs, scorer)]
    equiv = [equiv_step(p, r, APP, scorer=s).metrics for (p, r), s in zip(pairs, scorer)]
    after = [score_units(p, r, s) for (p, r), s in zip(pairs, scorer)]
    assert before == after
    for row, b in zip(rows, before):
        assert b.f1 == row["command_f1"]  # golden, unchanged
    assert all(e.f1 >= b.f1 for e, b in zip(equiv, before))
    corrected = [i for i, s in enumerate(scorer) if s == "corrected"]
    batch = equiv_batch([(*pairs[i], APP) for i in corrected])  # the fast path, harness computed
    assert batch == [equiv[i] for i in corrected]


units = st.lists(
    st.sampled_from(["ls -la", "ls -al", "ls  '-la'", "cat \"x y\"", "cat 'x y'", "ps aux | grep -v -i x", "cd /app", "cd app", "a && b", "a", "b", "make; make install",
                     "C-c", "^C", "cat 'x'", "cat x", "grep -i -n y f", "rm -rf d", "echo hi", "", "cd ..",
                     "cat > f << 'EOF'", "EOF", "tar -xzf a"]),
    max_size=6,
)


@settings(max_examples=200, deadline=None, database=None)
@given(units, units, st.sampled_from(["/", "/app", "/app/src", None]))
def test_property_equiv_f1_is_at_least_f1_and_leaves_f1_alone(pred, ref, cwd):
    harness = score_batch([(pred, ref)])[0]
    context = EquivContext(cwd=cwd, home="/root")
    equiv = equiv_step(pred, ref, context).metrics
    assert equiv.f1 >= harness.f1
    # the fast path (token-neutral rules skipped) gives the very same numbers
    assert equiv_batch([(pred, ref, context)]) == [equiv]
    assert score_units(pred, ref) == harness
    assert 0.0 <= equiv.precision <= 1.0 and 0.0 <= equiv.recall <= 1.0
