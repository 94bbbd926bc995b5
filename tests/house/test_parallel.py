"""How the suite's modules are grouped and ordered for its two pytest-xdist workers (tests/parallel.py): the
vLLM and Ray modules each one group, started first; every other module its own group, heaviest first."""
from __future__ import annotations

from tests.parallel import group_of, group_order


def test_vllm_and_ray_modules_share_their_group_and_the_rest_stand_alone():
    assert group_of("tests/engines/test_vllm_cpu.py", {"vllm"}) == "vllm"
    assert group_of("tests/ui/test_sweep_ui.py", {"ray"}) == "ray"
    assert group_of("tests/sweep/test_sweep_ray.py", {"ray", "vllm"}) == "ray"  # one Ray cluster at a time
    assert group_of("tests/sweep/test_sweep_plan.py", set()) == "ray"  # the sweep's room stays together
    assert group_of("tests/store/test_store.py", set()) == "tests/store/test_store.py"


def test_the_long_groups_come_first_then_the_heaviest_modules():
    weights = {"tests/a.py": 0, "ray": 9, "tests/b.py": 3, "vllm": 20, "tests/c.py": 5, "tests/d.py": 3}
    place = group_order(weights)
    assert sorted(place, key=place.get) == ["vllm", "ray", "tests/c.py", "tests/b.py", "tests/d.py", "tests/a.py"]
    assert group_order({"tests/a.py": 1}) == {"tests/a.py": 0}  # a run without the long groups
