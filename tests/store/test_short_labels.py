"""Short labels for long run names (lab.store.short_labels): never two alike, short where possible."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from lab.store.short_labels import LIMIT, short_labels
from tests.helpers_runs import LONG_NAMES


def test_series_names_keep_their_differing_end_and_middle():
    labels = short_labels(LONG_NAMES)
    assert len(set(labels.values())) == len(LONG_NAMES)
    a, b, c = (labels[n] for n in LONG_NAMES)
    assert b.endswith("checkpoint-200") and len(b) <= LIMIT  # differs from a at its end only
    assert "2Epoch" in a and "lr3e-5" in c and a.endswith("100") and c.endswith("100")  # a and c differ in the middle
    assert all(len(v) < len(k) for k, v in labels.items())


def test_a_trailing_run_suffix_stays_whole():
    names = [f"{LONG_NAMES[0]} [3007ab, partial 14/303]", f"{LONG_NAMES[1]} [367b01, partial 14/303]", "short [x]"]
    labels = short_labels(names)
    assert labels["short [x]"] == "short [x]"
    assert labels[names[0]].endswith("checkpoint-100 [3007ab, partial 14/303]")
    assert len(set(labels.values())) == 3


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab-/[] 0123456789", min_size=0, max_size=90), min_size=1, max_size=12))
def test_labels_are_never_alike(names):
    labels = short_labels(names)
    assert set(labels) == set(names)
    assert len(set(labels.values())) == len(labels)
    assert all(len(v) <= len(k) for k, v in labels.items())
