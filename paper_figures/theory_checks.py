"""Run the tests that check each theory statement of the claims ledger and record the outcome.

python paper_figures/theory_checks.py            # -> paper_figures/out/theory_checks.csv

Each statement (its id, as paper_figures/CLAIMS.md defines it) maps to the pytest node ids that
check it exactly on tabular MDPs or bandits (tests/theory, and a few algorithm tests); statements
with no test carry the reason instead. The CSV holds, per statement, the tests and how many
passed; paper_figures/claims.py turns it into the ledger's theory rows.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from envs.errors import ArgumentParser  # the one-line parser, without torch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "paper_figures" / "out" / "theory_checks.csv"

PO = "tests/theory/test_theory_policy_opt.py::"
GP = "tests/theory/test_theory_group_po.py::"
KL = "tests/theory/test_theory_kl_optima.py::"
RT = "tests/theory/test_theory_retrace.py::"
GA = "tests/theory/test_theory_gae.py::"
RG = "tests/theory/test_theory_regret.py::"
DP = "tests/theory/test_theory_dynamic_pg.py::"
TS = "tests/theory/test_theory_tsallis.py::"
DG = "tests/envs/test_offline_diagnostics.py::"

# statement id -> test node ids (a list) or the reason it has no test (a string)
STATEMENTS: dict[str, list[str] | str] = {
    "T-TR1": [PO + "test_performance_difference_identity"],
    "T-TR2": [
        PO + "test_lower_bound_has_no_violations",
        PO + "test_surrogate_error_is_second_order",
    ],
    "T-TR3": [PO + "test_minorize_maximize_never_decreases_eta"],
    "T-TR4": [
        "tests/theory/test_theory_taylor.py::test_first_order_is_trpo_surrogate",
        "tests/theory/test_theory_taylor.py::test_full_series_is_exact",
        "tests/theory/test_theory_taylor.py::test_halving_delta_divides_residual_by_two_to_the_k_plus_one",
    ],
    "T-PPO1": [PO + "test_clip_gradient_table"],
    "T-PPO2": [
        "tests/algos/test_ratio_containment.py::"
        "test_spo_ratios_stay_near_the_boundary_while_ppo_ratios_drift_past_it"
    ],
    "T-SPO1": [PO + "test_argmax_is_eps_aligned"],
    "T-FIX1": [
        "tests/algos/test_fixpo.py::test_max_kl_within_eps_after_update_even_with_huge_lr",
        "tests/algos/test_fixpo.py::test_absurd_lr_hits_the_cap_and_backtracking_keeps_the_guarantee",
    ],
    "T-BPO1": [
        PO + "test_bpo_target_is_the_brrl_optimum_on_a_bandit",
        PO + "test_bpo_target_improves_the_mdp_return",
        PO + "test_bpo_lower_bound_holds_for_random_fits",
        PO + "test_ppo_loss_is_a_one_sided_bpo_loss",
        PO + "test_cem_limit_is_the_elite_distribution",
        PO + "test_bpo_improvement_is_eps_times_the_median_spread",
    ],
    "T-S1": [
        "tests/theory/test_theory_success.py::test_per_state_identity",
        "tests/theory/test_theory_success.py::test_chi2_matches_definition",
        "tests/theory/test_theory_success.py::test_no_degradation_on_the_full_mdp",
    ],
    "T-GAE1": [
        "tests/controlrl/test_returns.py::test_gae_matches_plain_loop",
        "tests/controlrl/test_returns.py::test_lambda_zero_is_td_error",
        "tests/controlrl/test_returns.py::test_lambda_one_is_monte_carlo_return_minus_value",
        "tests/controlrl/test_returns.py::test_truncation_bootstraps_from_final_observation_not_reset",
    ],
    "T-GAE2": [GA + "test_unbiased_with_true_value_for_every_lambda"],
    "T-GAE3": [
        GA + "test_wrong_value_biases_gradient_except_at_lambda_one",
        GA + "test_wrong_value_bias_exact_by_enumeration",
        GA + "test_variance_against_lambda",
    ],
    "T-RET1": [RT + "test_fixed_point_and_gamma_contraction"],
    "T-RET2": [
        RT + "test_uncorrected_traces_expand_and_diverge",
        RT + "test_is_at_lambda_one_is_exact_in_one_step",
    ],
    "T-RET3": [RT + "test_retrace_no_slower_than_tree_backup_near_on_policy"],
    "T-RET4": [RT + "test_control_reaches_q_star"],
    "T-RET5": [
        RT + "test_sampled_target_mean_matches_operator",
        RT + "test_sample_variance_is_vs_retrace_vs_tree_backup",
    ],
    "T-IQL1": ["tests/theory/test_theory_iql.py::test_expectiles"],
    "T-IQL2": ["tests/theory/test_theory_iql.py::test_in_sample_value_iteration"],
    "T-IQL3": [
        "tests/theory/test_theory_iql.py::test_extraction_closed_form_is_the_weighted_nll_optimum",
        "tests/theory/test_theory_iql.py::test_extraction_concentrates_on_best_in_support_action",
    ],
    "T-REG1": "an empirical rate, not an exact identity: paper_figures/regret_polylog.py fits the "
    "regret curves (ledger row from regret_polylog.csv)",
    "T-REG2": [RG + "test_optimistic_po_sqrt_rate"],
    "T-REG3": [RG + "test_delayed_feedback"],
    "T-REG4": [
        DP + "test_return_gradient_matches_finite_differences",
        DP + "test_dynamic_pg_is_eps_optimal_at_every_epoch_and_state",
        DP + "test_dynamic_pg_needs_fewer_iterations_and_the_gap_grows_with_h",
    ],
    "T-REG5": [PO + "test_npg_monotone_to_optimum"],
    "T-K1": [
        GP + "test_kl_optimum_matches_simplex_optimisation_and_jitrl",
        GP + "test_astarpo_estimate_is_biased_down_and_converges",
    ],
    "T-K2": [KL + "test_vimpo_implied_value_is_path_independent_at_the_optimum"],
    "T-K3": [KL + "test_rebel_regression_solves_to_the_mirror_descent_step"],
    "T-K4": [
        KL + "test_off_policy_pairs_recover_the_regularised_optimum",
        KL + "test_copg_needs_no_importance_weights_and_a_fixed_baseline_would",
    ],
    "T-K5": [
        KL + "test_dpo_tabular_optimum_is_the_kl_regularised_one",
        KL + "test_dpo_and_exo_differ_in_a_restricted_class",
    ],
    "T-G1": [
        GP + "test_grpo_iterates_match_numerical_maximisation",
        GP + "test_grpo_fixed_points_of_the_recurrence",
        GP + "test_fixed_point_exceeds_p_ref_and_its_threshold",
        GP + "test_small_beta1_can_overshoot_an_existing_fixed_point",
        GP + "test_group_weight_is_the_expected_update_scale",
        GP + "test_group_weight_tends_to_the_population_weight",
        GP + "test_finite_group_recurrence_and_its_fixed_points",
        GP + "test_fixed_point_multiplier_is_the_derivative_of_one_step",
        GP + "test_lower_fixed_point_is_unstable_for_beta1_zero_and_small_p_ref",
    ],
    "T-G2": [
        GP + "test_zero_variance_groups_by_enumeration",
        GP + "test_zero_variance_frequency_by_monte_carlo",
    ],
    "T-G3": [
        GP + "test_marginal_gains_non_increasing_from_one",
        GP + "test_greedy_allocation_equals_brute_force",
    ],
    "T-G4": [
        GP + "test_group_estimators_bias_and_variance",
        "tests/theory/test_theory_group_parts.py::"
        "test_bnpo_exact_gradient_variance_against_reinforce_rloo_grpo",
    ],
    "T-G5": [GP + "test_optimal_baseline_minimises_variance"],
    "T-G6": [
        GP + "test_tpo_logit_gradient_is_p_minus_q",
        GP + "test_tpo_fit_reaches_the_target_whatever_the_learning_rate",
    ],
    "T-G7": [
        "tests/theory/test_theory_max_at_k.py::test_value_and_gradient",
        "tests/theory/test_theory_max_at_k.py::test_group_estimators_are_unbiased",
    ],
    "T-G8": [
        "tests/controlrl/test_nft.py::test_nft_gradient_equals_grpo_at_theta_old_for_every_group"
    ],
    "T-E1": [
        GP + "test_first_order_entropy_change",
        "tests/controlrl/test_objective.py::test_clip_cov_cuts_the_chosen_eligible_arm_only",
    ],
    "T-E2": [
        "tests/algos/test_grpo.py::test_entropy_falls_monotonically_with_one_update_per_rollout"
    ],
    "T-C1": [GP + "test_guidance_never_lowers_the_optimality_probability"],
    "T-C2": [
        TS + "test_log_q_tends_to_log_at_first_order",
        TS + "test_tsallis_kl_is_a_divergence_that_tends_to_kl",
        TS + "test_tsallis_greedy_maximises_the_regularised_objective",
        TS + "test_mvi_at_q_one_converges_to_the_entropy_regularised_optimum",
        TS + "test_mvi_solution_is_smooth_in_q_up_to_one",
    ],
    "T-C3": [
        KL + "test_control_as_inference_with_deterministic_dynamics",
        KL + "test_control_as_inference_is_optimistic_with_stochastic_dynamics",
    ],
    "T-C4": [
        "tests/theory/test_theory_mountain_car.py::test_step_is_gymnasium_bit_for_bit",
        "tests/theory/test_theory_mountain_car.py::test_value_iteration_fixed_point",
        "tests/theory/test_theory_mountain_car.py::"
        "test_greedy_controller_equals_exhaustive_search_near_the_goal",
        "tests/theory/test_theory_mountain_car.py::"
        "test_bang_bang_search_bounds_and_matches_the_grid_controller",
    ],
    "T-C5": [
        DG + "test_saco_and_tq_on_a_deterministic_mdp",
        DG + "test_rounding_merges_jitter_and_bad_references_are_refused",
    ],
}

FIELDS = ["statement", "tests", "passed", "failed", "reason"]


def run_tests(nodes: list[str]) -> dict[str, str]:
    """Outcome ('passed', 'failed', 'skipped' or 'missing') of each pytest node id."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-m",
            "slow or not slow",
            f"--junitxml={report}",
        ]
        proc = subprocess.run([*cmd, *nodes], cwd=ROOT, capture_output=True, text=True)
        if "ERROR: not found" in proc.stderr:  # a renamed test: name it instead of failing all
            raise SystemExit(f"theory_checks.py: {proc.stderr.strip().splitlines()[0]}")
        outcome = {n: "missing" for n in nodes}
        if not report.exists():
            return outcome
        for case in ET.parse(report).getroot().iter("testcase"):
            path = case.get("classname", "").replace(".", "/") + ".py"
            node = f"{path}::{case.get('name', '').split('[')[0]}"
            status = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    status = "failed"
                elif child.tag == "skipped":
                    status = "skipped"
            if node in outcome and outcome[node] != "failed":
                outcome[node] = status
        return outcome


def rows(outcome: dict[str, str]) -> list[dict[str, str]]:
    """One CSV row per statement from the tests' outcomes."""
    out = []
    for statement, tests in STATEMENTS.items():
        if isinstance(tests, str):
            out.append(
                {"statement": statement, "tests": "", "passed": "0", "failed": "0", "reason": tests}
            )
            continue
        passed = sum(outcome[t] == "passed" for t in tests)
        out.append(
            {
                "statement": statement,
                "tests": " ".join(tests),
                "passed": str(passed),
                "failed": str(len(tests) - passed),
                "reason": "",
            }
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="CSV to write")
    args = parser.parse_args(argv)
    nodes = [t for tests in STATEMENTS.values() if isinstance(tests, list) for t in tests]
    table = rows(run_tests(nodes))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)
    failed = [r["statement"] for r in table if r["failed"] != "0"]
    print(f"{len(table)} statements, {len(failed)} with a failing or missing test: {failed}")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
