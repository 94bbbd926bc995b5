"""Command-unit splitting rules (SPEC §5) and the deliberate keystrokes-null decision."""
from lab.scoring import WAIT_UNIT, split_command_units


def test_trailing_newline_and_crlf():
    assert split_command_units([{"keystrokes": "ls -la\n"}, {"keystrokes": "a\r\nb\rc\n"}]) == ["ls -la", "a", "b", "c"]


def test_heredoc_one_unit_per_line_blank_lines_dropped():
    keys = "cat > f.py << 'EOF'\nimport os\n\n  # comment  \nprint(1)\nEOF\n"
    assert split_command_units([{"keystrokes": keys}]) == ["cat > f.py << 'EOF'", "import os", "# comment", "print(1)", "EOF"]


def test_chains_not_split_and_inner_whitespace_kept():
    units = split_command_units([{"keystrokes": "cd /app &&  make | tail -5; echo $? || true\n"}])
    assert units == ["cd /app &&  make | tail -5; echo $? || true"]


def test_escaped_newline_is_not_a_break():
    assert split_command_units([{"keystrokes": "printf 'a\\nb'\n"}]) == ["printf 'a\\nb'"]


def test_empty_keystrokes_give_wait():
    cmds = [{"keystrokes": ""}, {"keystrokes": "  \n"}, {"duration": 1}, {"keystrokes": "C-c"}]
    assert split_command_units(cmds) == [WAIT_UNIT, WAIT_UNIT, WAIT_UNIT, "C-c"]


def test_keystrokes_null_becomes_None_unit_like_the_harness():
    assert split_command_units([{"keystrokes": None}]) == ["None"]


def test_non_string_values_go_through_str_and_non_dicts_are_dropped():
    assert split_command_units(["ls\n", 3, None, {"keystrokes": 42}, ["pwd"]]) == ["42"]
