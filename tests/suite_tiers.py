"""The `long` tier of the test suite.

Multi-minute end-to-end runs that repeat a path the default selection already covers once (another fixture through
the same route, another recorded play, the fault sets' self-checks) carry the ``long`` marker, given here by node-id
prefix (tests/conftest.py applies it at collection). ``bash scripts/test.sh`` and CI leave them out, so the default
selection stays near 15 minutes on 2 cores; ``bash scripts/test.sh --full`` runs them, and every stop runs it. Each
value says what the default selection keeps that covers the same route."""

from __future__ import annotations

_FAULT_SETS = ("the fault sets run through benchmarks/bench_fault_routing.py: tests/standin/test_heldout3_faults_caught.py "
               "and tests/realmm/test_fault_routing_real.py stay")
_PHI3_REPLAY = "the internvl_chat recording's replay (the same graph, HTTP client and custom-code route)"
_REAL_MIGRATION = "test_migrate_real[qwen2_vl] (data branch A) and [llava] (branch B) on the same real route"

LONG: dict[str, str] = {
    # the fault sets' self-checks: each fault applies to a green migration and changes what it computes (~4 min CPU)
    "tests/agent/test_heldout2_faults.py": _FAULT_SETS,
    "tests/agent/test_heldout3_faults.py": _FAULT_SETS,
    "tests/agent/test_heldout4_faults.py": _FAULT_SETS,
    "tests/agent/test_heldout5_faults.py": _FAULT_SETS,
    "tests/agent/test_heldout_groups_6_to_12.py": _FAULT_SETS,
    # a second recorded LLM play replayed end to end (~2.5 min CPU)
    "tests/agent/test_llm_recorded_http.py::test_recorded_live_run_replays_over_http[phi3_v_relay]": _PHI3_REPLAY,
    "tests/agent/test_llm_recorded_http.py::test_the_gate_the_live_run_stopped_at_passes_on_what_it_delivered"
    "[phi3_v_relay]": _PHI3_REPLAY,
    "tests/agent/test_llm_recorded_http.py::test_the_recorded_plugin_bug_fails_g2_the_same_way_every_run"
    "[phi3_v_relay]": _PHI3_REPLAY,
    # whole rules migrations whose one difference has its own unit tests (~2.5 min CPU each)
    "tests/agent/test_rules_cutoff_e2e.py": "tests/agent/test_cutoff_check.py and test_cutoff_sizing.py (the check and "
                                            "the raised cutoff), on the same rules route",
    "tests/agent/test_rules_open_world.py::test_size_dependent_expansion_with_image_sizes":
        "tests/open_world's fast sweep subset (a transformers-native family green end to end) and the media-expansion "
        "probe's unit tests",
    # a user's step made wrong twice on the same migration (~2 min CPU each)
    "tests/agent/test_patchlm_source_step.py::test_a_wrong_step_fails_the_parity_naming_the_cause":
        "test_patchlm_with_its_users_step_trains_like_that_step (the same step through G4) and the training-parity "
        "mutations of tests/agent/test_training_parity.py (a loss scale, labels shifted twice)",
    # real MindSpeed-MM: more fixtures through the same real route (5-10 min each)
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[qwen2_5_vl]": _REAL_MIGRATION,
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[qwen3_vl]": _REAL_MIGRATION,
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[glm4v]": _REAL_MIGRATION,
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[gemma3]": _REAL_MIGRATION,
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[internvl]": _REAL_MIGRATION,
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[llava_next]": _REAL_MIGRATION,
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[llava_onevision]": _REAL_MIGRATION,
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[paligemma]": _REAL_MIGRATION,
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[aya_vision]": _REAL_MIGRATION,
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[llava_siglip_qwen2]": _REAL_MIGRATION,
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[idefics3]": _REAL_MIGRATION,
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[smolvlm]": _REAL_MIGRATION,
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[qwen3_vl_moe]": _REAL_MIGRATION,
    # the rules policy's honest declines (early fusion, encoder-decoder) on the real checkout: the same decline the
    # stand-in's tests/agent/test_rules_open_world.py checks, before any launch
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[chameleon]":
        "tests/agent/test_rules_open_world.py::test_architectures_beyond_the_policy_are_declined_at_once",
    "tests/realmm/test_migrate_real.py::test_rules_migration_into_clean_real_checkout[florence2]":
        "tests/agent/test_rules_open_world.py::test_architectures_beyond_the_policy_are_declined_at_once",
    # the real Megatron route: a second new-component family end to end
    "tests/realmm/test_megatron_new_encoder_real.py": "test_megatron_new_component_real.py (a new SigLIP encoder "
                                                      "registered in the real snapshot) and test_megatron_route_real.py",
    "tests/realmm/test_megatron_new_component_real.py::test_new_pooled_projector_registered_in_the_real_snapshot":
        "its SigLIP-encoder test (the same registration path in the real snapshot)",
}


def long_reason(nodeid: str) -> str | None:
    """What the default selection keeps in place of this test, when the test is in the long tier."""
    for prefix, kept in LONG.items():
        if nodeid == prefix or nodeid.startswith((prefix + "::", prefix + "[")):
            return kept
    return None
