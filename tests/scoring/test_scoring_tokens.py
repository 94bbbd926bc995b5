"""Normalization, shlex tokenization (odd/even apostrophes) and token F1 (SPEC §6)."""
import random
import shlex

from lab.scoring import normalize_unit, token_f1, tokenize
from lab.scoring.tokens import tokenize as cached_tokenize


def test_normalize():
    assert normalize_unit("  ls \t -la\n ") == "ls -la"
    assert normalize_unit("   ") == "<WAIT>"


def test_tokenize_basics():
    assert tokenize("") == ()
    assert tokenize(" <WAIT> ") == ("<wait>",)
    assert tokenize("C-c") == ("c-c",)
    assert tokenize("find . -name '*.CPP'") == ("find", ".", "-name", "*.cpp")


def test_odd_apostrophes_fall_back_to_whitespace():
    assert tokenize("# Check that the script's shebang") == ("#", "check", "that", "the", "script's", "shebang")


def test_even_apostrophes_merge_words():
    assert tokenize("we'll go and that's it") == ("well go and thats", "it")


def test_fast_path_matches_shlex_on_random_text():
    alphabet = "ab c\t\x0b\x1c\xa0é#|&;$*{}-=/.X"
    rnd = random.Random(7)
    for _ in range(3000):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 10)))
        low = text.strip().lower()
        if low and low != "<wait>":
            assert cached_tokenize.__wrapped__(text) == tuple(shlex.split(low))


def test_token_f1_rules():
    assert token_f1([], []) == 1.0
    assert token_f1(["a"], []) == 0.0
    assert token_f1(["a"], ["b"]) == 0.0
    assert token_f1(["a", "a", "b"], ["a", "b", "b"]) == token_f1(["a", "b", "b"], ["a", "a", "b"])
    assert round(token_f1(["a", "a", "b"], ["a", "b", "b"]), 4) == 0.6667
