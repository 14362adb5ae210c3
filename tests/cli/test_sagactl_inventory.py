"""`sagactl inventory show | seed` against the real stack in the local AWS."""

from __future__ import annotations

from local_aws.environment import LocalAws
from tests.cli.sagactl_helpers import Sagactl, run_example, saga, sagactl

__all__ = ["saga", "sagactl"]


def test_show_lists_the_seeded_stock(saga: LocalAws, sagactl: Sagactl) -> None:
    shown = sagactl("inventory", "show", "--json")

    assert shown.code == 0, shown.err
    assert shown.json()["inventory"] == {"SKU-BLUE-MUG": 5, "SKU-EMPTY": 0, "SKU-RED-MUG": 100}


def test_seed_sets_levels_so_a_case_can_reserve(saga: LocalAws, sagactl: Sagactl) -> None:
    seeded = sagactl("inventory", "seed", "--sku", "SKU-EMPTY=3", "--sku", "SKU-NEW=1", "--json")
    assert seeded.code == 0, seeded.err
    assert seeded.json() == {"seeded": {"SKU-EMPTY": 3, "SKU-NEW": 1}, "held_under_way": {}}

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


def test_seed_refuses_a_sku_that_a_case_under_way_holds_then_force_says_what_comes_back(
    saga: LocalAws, sagactl: Sagactl
) -> None:
    run_example(sagactl, saga, "happy-path")  # shipped: its reservation never comes back
    run_example(sagactl, saga, "compensation-stuck")  # FAILED at the release: it still may
    assert sagactl("inventory", "show", "--json").json()["inventory"]["SKU-RED-MUG"] == 98

    refused = sagactl("inventory", "seed", "--sku", "SKU-RED-MUG=250", "--sku", "SKU-BLUE-MUG=9")

    assert refused.code == 3
    assert refused.err.splitlines() == [
        "sagactl: not seeded: reservations of cases under way hold stock, and their release "
        "would give it back on top of the level you set:",
        "  SKU-RED-MUG: 1 unit(s) held by 1 case(s) under way: case-compensation-stuck",
        "seed once those cases have finished, or pass --force to set it anyway",
    ]
    levels = sagactl("inventory", "show", "--json").json()["inventory"]
    assert (levels["SKU-RED-MUG"], levels["SKU-BLUE-MUG"]) == (98, 5)  # nothing set
    assert sagactl("inventory", "seed", "--sku", "SKU-BLUE-MUG=9").code == 0  # nobody holds it

    forced = sagactl("inventory", "seed", "--sku", "SKU-RED-MUG=250", "--force")
    assert forced.code == 0, forced.err
    assert forced.out.splitlines() == [
        "  SKU-RED-MUG              set to 250 (1 unit(s) held by 1 case(s) under way: "
        "case-compensation-stuck: a release adds it back)"
    ]
    # What the refusal warned of: the redrive releases the reservation on top of the new level.
    redriven = sagactl("redrive", "case-compensation-stuck", "--yes", "--json")
    assert redriven.code == 0, redriven.err
    saga.wait_for_execution(redriven.json()["result"]["execution_arn"], timeout_seconds=120)
    assert sagactl("inventory", "show", "--json").json()["inventory"]["SKU-RED-MUG"] == 251
