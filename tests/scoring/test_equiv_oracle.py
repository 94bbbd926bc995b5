"""equiv_f1 proved on an oracle: a corpus of pairs whose truth a real bash decides by running both
sides (tests/scoring/equiv_oracle.py); the rules never write alike two sides the shell runs differently."""
import pytest

from tests.scoring.equiv_oracle import equiv_f1_is_one, harness_full_match, load_corpus, rules_claim, run_side, shell_equivalent

# the pairs issue 17 names, as (ref, pred) first units of a pair in the corpus
ISSUE_PAIRS = {
    ("cd build && rm -rf *", "cd build; rm -rf *"), ("rm -if a.txt", "rm -fi a.txt"),
    ("mv -nf a.txt b.txt", "mv -fn a.txt b.txt"), ("cp -in a.txt b.txt", "cp -ni a.txt b.txt"),
    ("ls -t -S", "ls -S -t"), ("ls -lC", "ls -Cl"), ("df -hk .", "df -kh ."),
    ("cd ~", "cd $HOME"), ("tar -xzf archive.tgz", "tar xzf archive.tgz"), ("head -n 5 big.txt", "head -n5 big.txt"),
}
# the equivalences issue 17 says the rules missed: they must be claimed now
MUST_CLAIM = {("cd ~", "cd $HOME"), ("tar -xzf archive.tgz", "tar xzf archive.tgz"), ("head -n 5 big.txt", "head -n5 big.txt")}
# issue 28: flags of one conflict group that commute after all, and the `-DIGITS` count of head/tail
MUST_CLAIM_28 = {
    ("cp -fn a.txt b.txt", "cp -nf a.txt b.txt"), ("cp -f -i a.txt b.txt", "cp -i -f a.txt b.txt"),
    ("ls -l -1", "ls -1 -l"), ("ls -1 -g", "ls -g -1"), ("ls -o -1 sub", "ls -1 -o sub"), ("ls -n -1", "ls -1 -n"),
    ("ls -n -l", "ls -l -n"), ("ls -g -o", "ls -o -g"), ("ls -s -h -k big.txt", "ls -s -k -h big.txt"),
    ("grep -c -l alpha a.txt", "grep -l -c alpha a.txt"), ("grep -q -c alpha a.txt", "grep -c -q alpha a.txt"),
    ("grep -l -q alpha a.txt", "grep -q -l alpha a.txt"), ("grep -L -c alpha a.txt b.txt", "grep -c -L alpha a.txt b.txt"),
    ("head -5 big.txt", "head -n 5 big.txt"), ("tail -5 big.txt", "tail -n 5 big.txt"),
    ("head -5 -n 3 big.txt", "head -n 5 -n 3 big.txt"), ("head -5 a.txt big.txt", "head -n 5 a.txt big.txt"),
}


def test_the_corpus_is_big_enough_and_holds_the_issues_pairs():
    pairs = load_corpus()
    assert len(pairs) >= 60
    assert sum(p["equivalent"] for p in pairs) >= 20 and sum(not p["equivalent"] for p in pairs) >= 20
    assert ISSUE_PAIRS <= {(p["ref"][0], p["pred"][0]) for p in pairs}


@pytest.mark.slow  # over 5 s: out of the fast loop
def test_bash_says_what_the_corpus_says():
    wrong = [(p["ref"], p["pred"], p["equivalent"]) for p in load_corpus()
             if shell_equivalent(p["ref"], p["pred"]) != p["equivalent"]]
    assert wrong == []


@pytest.mark.slow  # about 7 s on two cores: the full run, not the fast loop
def test_the_rules_never_claim_what_the_shell_denies():
    pairs = load_corpus()
    claimed = [p for p in pairs if rules_claim(p["ref"], p["pred"])]
    wrong = [(p["ref"], p["pred"]) for p in claimed if not shell_equivalent(p["ref"], p["pred"])]
    assert wrong == []
    assert len(claimed) > len(pairs) // 3  # the rules still forgive what is really the same
    for must in (MUST_CLAIM, MUST_CLAIM_28):
        named = [p for p in pairs if (p["ref"][0], p["pred"][0]) in must]
        assert {(p["ref"][0], p["pred"][0]) for p in named} == must
        assert [(p["ref"], p["pred"]) for p in named if not rules_claim(p["ref"], p["pred"])] == []


def test_equiv_f1_is_one_only_where_the_shell_or_the_harness_says_so():
    """equiv_f1 = 1 where the harness's F1 is < 1 means the shell agrees; the pairs the harness's own
    token F1 (lower-cased, quote-stripped bags) already scores 1 keep it (equiv_f1 >= F1), and
    those the shell denies are listed as the harness's, not the rules'."""
    pairs = load_corpus()
    ones = [p for p in pairs if equiv_f1_is_one(p["ref"], p["pred"])]
    by_rules = [p for p in ones if not harness_full_match(p["ref"], p["pred"])]
    assert by_rules and all(shell_equivalent(p["ref"], p["pred"]) for p in by_rules)
    harness_only = {(p["ref"][0], p["pred"][0]) for p in ones
                    if harness_full_match(p["ref"], p["pred"]) and not shell_equivalent(p["ref"], p["pred"])}
    assert all(not rules_claim(p["ref"], p["pred"]) for p in pairs if (p["ref"][0], p["pred"][0]) in harness_only)
    assert ("ls -a", "ls -A") in harness_only  # the harness lower-cases: known, and not the rules' doing


def test_the_oracle_sees_prompts_failures_and_where_the_session_ends():
    # `rm -i` with stdin closed reads end-of-file: the file stays (the tree differs)
    prompted = run_side(("rm -i a.txt",), "full")[1]
    assert any(path == "work/a.txt" for path, _ in prompted)
    assert not any(path == "work/a.txt" for path, _ in run_side(("rm a.txt",), "full")[1])
    # the exit status and the final directory are part of what a side did
    assert "<status=1 " in run_side(("false",), "full")[0] and "<status=0 " in run_side(("true",), "full")[0]
    assert run_side(("cd sub",), "full")[0].endswith("pwd=<root>/work/sub>\n")
    # the bare tree has no build/: `cd build && rm -rf *` removes nothing there, `cd build; rm -rf *` everything
    assert run_side(("cd build && rm -rf *",), "bare") != run_side(("cd build; rm -rf *",), "bare")
