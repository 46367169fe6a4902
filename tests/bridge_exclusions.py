"""The tests of the default suite that cannot run on TransformerLens 4.x's native ``TransformerBridge``, each with
the reason (``make test-tl4`` runs the whole default suite there; ``tests/conftest.py`` skips these with their
reason). Everything else runs on 4.x. A test leaves this list when what it needs runs on the bridge."""

HOOKS = (
    "runs TransformerLens 3.9's hook patching engine (per-head hook_result and split q/k/v inputs, which 4.3's "
    "native bridge does not offer); the bare engine runs on 4.x and make test-tl4 checks its scores against 3.9's"
)
THEOREM3 = "Theorem 3 / Corollary 3's weight mask prunes a HookedTransformer random network by 3.9's parameter names"
INIT_FROM = "--init-from copies a construction's weights by 3.9's parameter names (refused on 4.x at parse time)"
ALIGN = "--align (IIT) resamples 3.9's per-head outputs in every step (refused on 4.x at parse time)"
COUNTER_4096 = (
    "modular_counter in float32 is refused past T = 2048 on 4.x: the bridge's kernels round its staircase differently"
)
CLASSES = "checks TransformerLens 3.9's own classes (HookedTransformer, HookedTransformerConfig, use_attn_scale=False)"
ALIGN_REFUSALS = "checks --align's own refusals, which on 4.x the parse-time refusal of --align itself comes before"
QUICK_ORDER = (
    "asserts an ordering of two quick-scale training runs (LSTM vs twin read errors) that the bridge's numerics "
    "reverse at that scale (67 vs 54 errors); the full run's rule is unaffected"
)

STACKED = (
    "stacks the hook-free twin (TransformerLens 3.9's parameters and initialisation); on 4.x a seed's twin is the "
    "bridge's, so --seeds trains every run apart there (test_a_twin_the_hook_free_engine_cannot_build_is_not_stacked)"
)

ALIBI = "trains twins with --pos alibi (ALiBi), which TransformerLens 4's bridge lacks (refused on 4.x at parse time)"

#: node id (without parameters) -> why it cannot run on the bridge
NOT_ON_BRIDGE: dict[str, str] = {
    **{
        f"tests/circuits/{name}": HOOKS
        for name in (
            "test_atp_star.py::test_atp_star_is_refused_on_the_hook_engine",
            "test_gim.py::test_gim_is_refused_on_the_hook_engine",
            "test_bare_engine.py::test_the_bare_engine_is_the_default_and_scores_alike",
            "test_bare_engine.py::test_the_engines_agree",
            "test_bare_engine.py::test_a_constructions_weights_patch_on_hooks_as_on_the_bare_engine",
            "test_bare_engine.py::test_the_engines_agree_on_a_twin_with_layernorm",
            "test_bare_engine.py::test_dense_and_sparse_patches_agree_with_the_hooks",
            "test_positions.py::test_the_hook_engine_splits_by_query_as_the_bare_engine_does",
            "test_circuits.py::test_ground_truth_is_what_the_model_uses",
            "test_circuits.py::test_ground_truth_of_random_automata_ties_to_behaviour",
            "test_circuits.py::test_modular_counter_methods_recover_the_proof",
            "test_levels.py::test_backup_routes_are_an_or_under_zero_ablation_and_scored_as_one",
            "test_levels.py::test_edges_called_invisible_have_no_effect_under_the_corruption",
            "test_levels.py::test_edges_equal_to_their_mean_have_no_effect_under_mean_ablation",
            "test_levels.py::test_every_level_leaves_the_read_outputs_exact",
            "test_levels.py::test_levels_describe_every_edge_and_refuse_unknown_or_empty_levels",
            "test_levels.py::test_levels_of_random_automata_tie_to_behaviour",
            "test_levels.py::test_negatives_are_outside_every_level_that_counts",
            "test_levels.py::test_per_coordinate_liveness_drops_the_edges_no_logit_reads",
            "test_levels.py::test_unread_outputs_are_their_own_reason_on_dyck",
            "test_methods.py::test_eap_ig_crosses_the_staircase_that_stops_attribution",
            "test_methods.py::test_eap_ig_with_one_step_is_attribution_patching",
            "test_methods.py::test_learned_edge_masks_keep_the_counter_and_need_the_bare_engine",
            "test_patching.py::test_a_run_from_a_later_block_gives_the_run_from_the_tokens",
            "test_patching.py::test_batched_path_patching_scores_what_one_pass_per_edge_scores",
            "test_registry.py::test_bare_only_methods_are_refused_on_hooks_by_their_record",
        )
    },
    **{
        f"tests/circuits/test_imposed.py::{name}": ALIGN
        for name in (
            "test_the_imposed_truth_is_the_edges_between_imposed_nodes_in_levels",
            "test_a_twin_family_on_the_leaderboard_and_its_off_circuit_effect",
            "test_each_off_circuit_node_alone_is_its_own_resample",
            "test_the_twins_table_says_which_count_and_why_not",
        )
    },
    "tests/train/test_align_training.py::test_strictness_on_the_outputs_is_the_kl_from_the_unablated_run": ALIGN,
    "tests/compare/test_compare.py::test_dyck_comparison_finds_what_the_constructions_do": THEOREM3,
    "tests/compare/test_compare.py::test_report_is_one_self_contained_file": THEOREM3,
    "tests/compare/test_compare.py::test_the_theorem3_headings_say_what_the_numbers_show": THEOREM3,
    "tests/compare/test_compare.py::test_what_we_conclude_follows_the_numbers": THEOREM3,
    "tests/probes/test_probes.py::test_corollary3_two_prunings_share_one_identical_matrix": THEOREM3,
    "tests/probes/test_probes.py::test_weight_mask_prunes_a_random_network_towards_a_construction": THEOREM3,
    "tests/compare/test_evaluate.py::test_position_shifts_and_frozen_construction_positions_reach_further": INIT_FROM,
    "tests/experiments/test_experiments.py::test_dyck_balance_quick": INIT_FROM,
    "tests/train/test_train.py::test_a_twin_started_from_a_construction_keeps_its_frozen_first_layer": INIT_FROM,
    "tests/train/test_align_training.py::test_an_aligned_twin_records_what_was_imposed": ALIGN,
    "tests/train/test_align_training.py::test_circuit_methods_are_scored_against_the_imposed_circuit": ALIGN,
    "tests/train/test_align_training.py::test_every_variable_per_step_swaps_each_imposed_variable": ALIGN,
    "tests/train/test_align_training.py::test_the_graph_imposes_the_algorithms_edges_by_path_interchange": ALIGN,
    "tests/experiments/test_experiments.py::test_algorithm_confusion_quick": ALIGN,
    "tests/train/test_align_training.py::test_bad_alignments_are_one_line": ALIGN_REFUSALS,
    "tests/train/test_align_training.py::test_a_twin_too_shallow_for_the_construction_is_refused": ALIGN_REFUSALS,
    "tests/constructions/test_constructions.py::test_counter_at_4096_float32": COUNTER_4096,
    "tests/model/test_device.py::test_models_are_built_on_the_cpu_even_where_cuda_is_present": CLASSES,
    "tests/model/test_spec_hooked.py::test_a_saved_model_loads_in_plain_transformer_lens": CLASSES,
    "tests/model/test_spec_hooked.py::test_export_matches_reference_forward_with_or_without_attn_scale": CLASSES,
    "tests/model/test_spec_hooked.py::test_strict_load_keeps_weights_unprocessed": CLASSES,
    "tests/model/test_spec_hooked.py::test_the_back_end_follows_the_installed_transformer_lens": CLASSES,
    "tests/experiments/test_experiments.py::test_ffl_glitches_quick": QUICK_ORDER,
    "tests/experiments/test_scratchpad.py::test_scratchpad_quick": ALIBI,
    "tests/tasks/test_copy_and_scratchpad.py::test_the_command_line_trains_both_and_refuses_the_other_kinds_options": ALIBI,
    "tests/train/test_stacked.py::test_the_stacked_forward_is_each_members_forward": STACKED,
    "tests/train/test_stacked.py::test_each_members_gradient_is_its_single_runs_clipped_member_by_member": STACKED,
    "tests/train/test_stacked.py::test_a_stack_trains_its_separate_runs_up_to_rounding": STACKED,
    "tests/train/test_stacked.py::test_a_member_that_reaches_its_target_leaves_the_stack": STACKED,
    "tests/train/test_stacked.py::test_a_stopped_stack_resumes_bit_for_bit": STACKED,
    "tests/train/test_stacked.py::test_a_sweep_stacks_small_twins_and_resumes_the_stack": STACKED,
    "tests/train/test_stacked.py::test_the_rule_stacks_small_steps_only": STACKED,
    "tests/train/test_stacked.py::test_a_stack_refuses_what_it_cannot_train": STACKED,
    "tests/train/test_stacked.py::test_a_killed_stacked_sweep_resumes_as_its_stack_bit_for_bit": STACKED,
}
