"""Similarity matrix and unit alignment for the command-level diff."""
from lab.scoring import align_units, score_units, similarity_matrix


def test_similarity_matrix_shape_and_values():
    m = similarity_matrix(["ls -la", "pwd"], ["ls  -la", "cat x", "PWD"])
    assert len(m) == 2 and all(len(r) == 3 for r in m)
    assert m[0][0] == 1.0 and m[1][2] == 1.0 and m[0][1] == 0.0


def test_align_units_best_matches_and_unmatched():
    pred = ["ls -la /app", "rm -rf /", "ls -la /app"]
    ref = ["ls -la", "cat notes.txt"]
    a = align_units(pred, ref)
    assert [m.best_index for m in a.pred] == [0, None, 0]
    assert [m.best_index for m in a.ref] == [0, None]
    assert a.ref[0].f1 == a.pred[0].f1 == 0.8
    assert not a.ref[1].matched and a.ref[1].text == "cat notes.txt"
    assert a.metrics == score_units(pred, ref)
    assert a.to_dict()["metrics"]["command_f1"] == a.metrics.f1
