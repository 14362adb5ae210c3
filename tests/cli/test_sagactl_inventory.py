"""`sagactl inventory show | seed` against the real stack in the local AWS."""

from __future__ import annotations

from sagactl.local.environment import LocalAws
from tests.cli.sagactl_helpers import Sagactl, run_example, saga, sagactl

__all__ = ["saga", "sagactl"]


def test_show_lists_the_seeded_stock(saga: LocalAws, sagactl: Sagactl) -> None:
    shown = sagactl("inventory", "show", "--json")

    assert shown.code == 0, shown.err
    assert shown.json()["inventory"] == {"SKU-BLUE-MUG": 5, "SKU-EMPTY": 0, "SKU-RED-MUG": 100}


def test_seed_sets_levels_so_a_case_can_reserve(saga: LocalAws, sagactl: Sagactl) -> None:
    seeded = sagactl("inventory", "seed", "--sku", "SKU-EMPTY=3", "--sku", "SKU-NEW=1", "--json")
    assert seeded.code == 0, seeded.err
    assert seeded.json() == {"seeded": {"SKU-EMPTY": 3, "SKU-NEW": 1}}

    # The out-of-stock example asks for SKU-EMPTY: with stock it now completes.
    run_example(sagactl, saga, "out-of-stock")
    levels = sagactl("inventory", "show", "--json").json()["inventory"]
    assert levels["SKU-EMPTY"] == 2
    assert levels["SKU-NEW"] == 1
    # Seeding sets the level (it does not add), so repeating it is harmless.
    assert sagactl("inventory", "seed", "--sku", "SKU-NEW=1").code == 0
    assert sagactl("inventory", "show", "--json").json()["inventory"]["SKU-NEW"] == 1


def test_bad_seed_is_refused_and_changes_nothing(saga: LocalAws, sagactl: Sagactl) -> None:
    for bad, message in [
        ("SKU-RED-MUG", "--sku expects SKU=N"),
        ("SKU-RED-MUG=lots", "stock must be a whole number"),
        ("SKU-RED-MUG=-1", "stock cannot be negative"),
    ]:
        refused = sagactl("inventory", "seed", "--sku", "SKU-BLUE-MUG=0", "--sku", bad)
        assert refused.code == 2, refused.err
        assert message in refused.err
        assert "Traceback" not in refused.err
    levels = sagactl("inventory", "show", "--json").json()["inventory"]
    assert levels["SKU-RED-MUG"] == 100
    assert levels["SKU-BLUE-MUG"] == 5
