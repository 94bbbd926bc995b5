-- Named, parameterized queries used by the plots and the UI (lab.store.queries).
-- Each starts with "-- name: NAME". Values are $named parameters, never pasted text;
-- "{order}" is filled only from the whitelist in queries.py.

-- name: leaderboard
-- rank: the 56-row snapshot's rank in that view, the 116-row ranking's otherwise (lab runs: none).
SELECT name, source, run_id, model_id, family, training_method, params_b, active_params_b,
       score, score_marked, avg_command_f1, precision, recall, first_cmd_exact_pct, valid_json_pct,
       sec_per_step, load_s, template_status, rank_eligible,
       CASE WHEN $first56_only THEN rank ELSE rank_latest END AS rank, in_first_56, equiv_score, spelling_gap,
       equiv_state, steps, total_steps, coverage, partial, ref_nll_per_token
FROM results_all
-- the reference answers' NLL per token under the run's model (step_reference: its newest
-- score-reference run), over the run's steps that have one; NULL: not recorded
LEFT JOIN (SELECT run_id, sum(-ref_logprob) / nullif(sum(ref_tokens), 0) AS ref_nll_per_token
           FROM step_reference GROUP BY run_id) USING (run_id)
WHERE scoring_version = 'corrected_303'
  AND ((source = 'published' AND (NOT $first56_only OR in_first_56))
       OR (source = 'run' AND $include_runs))
ORDER BY {order}, name;

-- name: score_vs_params
SELECT name, source, run_id, coverage, partial, family, training, training_method, params_b,
       coalesce(active_params_b, params_b) AS active_params_b, active_params_b IS NOT NULL AS is_moe, score
FROM results_all
WHERE scoring_version = 'corrected_303' AND params_b IS NOT NULL AND score IS NOT NULL
  AND ((source = 'published' AND (NOT $first56_only OR in_first_56)) OR (source = 'run' AND $include_runs))
ORDER BY params_b, name;

-- name: precision_recall
SELECT name, source, run_id, coverage, partial, family, training_method, precision, recall, avg_command_f1, score
FROM results_all
WHERE scoring_version = 'corrected_303' AND precision IS NOT NULL AND recall IS NOT NULL
  AND ((source = 'published' AND (NOT $first56_only OR in_first_56)) OR (source = 'run' AND $include_runs))
ORDER BY score DESC, name;

-- name: json_vs_f1
SELECT name, source, run_id, coverage, partial, family, training_method, valid_json_pct, avg_command_f1, score
FROM results_all
WHERE scoring_version = 'corrected_303' AND valid_json_pct IS NOT NULL AND avg_command_f1 IS NOT NULL
  AND ((source = 'published' AND (NOT $first56_only OR in_first_56)) OR (source = 'run' AND $include_runs))
ORDER BY valid_json_pct, name;

-- name: speed_vs_score
SELECT name, source, run_id, coverage, partial, family, training_method, sec_per_step, score
FROM results_all
WHERE scoring_version = 'corrected_303' AND sec_per_step > 0 AND score IS NOT NULL
  AND ((source = 'published' AND (NOT $first56_only OR in_first_56)) OR (source = 'run' AND $include_runs))
ORDER BY sec_per_step, score DESC, name;

-- name: by_bucket
SELECT 'published' AS source, CAST(NULL AS VARCHAR) AS run_id, coalesce(model_label, model) AS name,
       group_name AS bucket, steps, avg_command_f1
FROM leaderboard_groups
WHERE group_type = 'replay_position_bucket' AND $include_published
UNION ALL
SELECT 'run', s.run_id, any_value(r.display_name) || ' [' || left(s.run_id, 6) || CASE WHEN any_value(r.partial) THEN ', partial ' || any_value(r.steps) || '/' || any_value(r.total_steps) WHEN any_value(r.selected_steps) IS NOT NULL THEN ', ' || limited_to(any_value(r.selected_steps)) ELSE '' END || ']', s.bucket,
       count(*), round(avg(s.command_f1), 4)
FROM steps s JOIN runs r ON r.run_id = s.run_id
WHERE r.scoring_version = 'corrected_303' AND ($run_ids IS NULL OR list_contains($run_ids, s.run_id))
GROUP BY s.run_id, s.bucket
ORDER BY source, name, CASE bucket WHEN 'early' THEN 0 WHEN 'mid' THEN 1 ELSE 2 END;

-- name: by_source_group
SELECT 'published' AS source, CAST(NULL AS VARCHAR) AS run_id, coalesce(model_label, model) AS name,
       group_name AS source_group, replace(replace(group_type, 'source_group_', ''), '_listed', '') AS listed,
       steps, avg_command_f1, first_cmd_exact_pct
FROM leaderboard_groups
WHERE group_type LIKE 'source_group%' AND $include_published
UNION ALL
SELECT 'run', s.run_id, any_value(r.display_name) || ' [' || left(s.run_id, 6) || CASE WHEN any_value(r.partial) THEN ', partial ' || any_value(r.steps) || '/' || any_value(r.total_steps) WHEN any_value(r.selected_steps) IS NOT NULL THEN ', ' || limited_to(any_value(r.selected_steps)) ELSE '' END || ']', s.source_group, 'all',
       count(*), round(avg(s.command_f1), 4), round(100 * avg(s.first_cmd_exact), 1)
FROM steps s JOIN runs r ON r.run_id = s.run_id
WHERE r.scoring_version = 'corrected_303' AND ($run_ids IS NULL OR list_contains($run_ids, s.run_id))
GROUP BY s.run_id, s.source_group
ORDER BY source, name, source_group;

-- name: checkpoint_series
SELECT name, source, run_id, coverage, partial, family, training_method, epochs, checkpoint_step,
       coalesce(checkpoint_step, epochs) AS x,
       CASE WHEN checkpoint_step IS NOT NULL THEN 'checkpoint step' ELSE 'epoch' END AS x_kind,
       regexp_replace(regexp_replace(name, '\d+-?Epoch', 'N-Epoch', 'gi'),
                      'checkpoint-\d+', 'checkpoint-N', 'g') AS series,
       score
FROM results_all
WHERE scoring_version = 'corrected_303' AND score IS NOT NULL
  AND (epochs IS NOT NULL OR checkpoint_step IS NOT NULL)
  AND (name ILIKE $pattern OR family ILIKE $pattern)
QUALIFY count(*) OVER (PARTITION BY series, x_kind) >= $min_points
ORDER BY series, x_kind, x, name;

-- name: tb2lite_vs_tblite
WITH pairs AS (
    SELECT DISTINCT t.base_model, r.name, r.source, r.run_id, r.score, r.model_id
    FROM (SELECT DISTINCT base_model FROM tblite WHERE base_model IS NOT NULL) t
    JOIN results_all r
      ON r.scoring_version = 'corrected_303' AND r.score IS NOT NULL
     AND (r.model_id = t.base_model OR r.name ILIKE '%' || split_part(t.base_model, '/', 2) || '%'
          OR r.model_id IN (SELECT model_id FROM tblite x WHERE x.base_model = t.base_model))
), shared AS (SELECT DISTINCT base_model FROM pairs)
SELECT 'TB2-lite' AS benchmark, base_model, name, source, score, CAST(NULL AS DOUBLE) AS spread
FROM pairs WHERE $base_model IS NULL OR base_model = $base_model
UNION ALL
SELECT 'TB Lite', base_model, model, 'published', tb_lite, tb_lite_spread
FROM tblite WHERE base_model IN (SELECT base_model FROM shared) AND ($base_model IS NULL OR base_model = $base_model)
UNION ALL
SELECT 'TB 2.1', base_model, model, 'published', tb21, tb21_spread
FROM tblite WHERE base_model IN (SELECT base_model FROM shared) AND ($base_model IS NULL OR base_model = $base_model)
ORDER BY benchmark DESC, base_model, score DESC, name;

-- name: runs
SELECT run_id, display_name, path, model_id, scoring_version, steps, tasks, score, avg_command_f1,
       avg_command_precision, avg_command_recall, first_cmd_exact_pct, valid_json_pct, avg_sec_per_step,
       template_status, rank_eligible, timestamp, family, params_b, training_method, checkpoint_step, imported_at,
       equiv_score, spelling_gap, equiv_state
FROM runs
ORDER BY {order}, display_name;

-- name: run_steps
SELECT run_id, ord, task_id, step_idx, step_key, sample_idx, source_group, bucket, valid_json, has_analysis,
       has_plan, ref_task_complete, pred_task_complete, pred_task_complete_true, first_cmd_exact,
       command_precision, command_recall, command_f1, n_ref_units, n_pred_units, ref_command_units,
       pred_command_units, pred_preview, raw_output, finish_reason, template_status, latency_s
FROM steps
WHERE run_id = $run_id
ORDER BY ord;

-- name: step_across_runs
SELECT s.run_id, r.display_name, r.scoring_version, s.step_key, s.task_id, s.step_idx, s.bucket, s.source_group,
       s.valid_json, s.first_cmd_exact, s.command_precision, s.command_recall, s.command_f1,
       s.n_ref_units, s.n_pred_units, s.ref_command_units, s.pred_command_units, s.pred_preview,
       s.raw_output, s.finish_reason
FROM steps s JOIN runs r ON r.run_id = s.run_id
WHERE s.step_key = $step_key AND ($run_ids IS NULL OR list_contains($run_ids, s.run_id))
ORDER BY s.command_f1 DESC, r.display_name;

-- name: slice_pair
SELECT a.step_key, a.task_id, a.step_idx, a.bucket, a.source_group,
       a.command_f1 AS f1_a, b.command_f1 AS f1_b, a.command_f1 - b.command_f1 AS delta
FROM steps a JOIN steps b ON b.step_key = a.step_key
WHERE a.run_id = $run_a AND b.run_id = $run_b
  AND a.command_f1 >= $f1_a_min AND b.command_f1 < $f1_b_max
ORDER BY a.task_id, a.step_idx;

-- name: tblite
SELECT model, model_id, base_model, training, dataset, tb_lite, tb_lite_spread, tb21, tb21_spread, source
FROM tblite ORDER BY row_no;

-- name: legacy_leaderboard
SELECT rank, model_label, legacy_score, avg_command_f1, first_cmd_exact_pct, sec_per_step, load_s,
       scoring_version, comparable
FROM legacy_leaderboard ORDER BY row_no;

-- name: equiv_vs_f1
-- equiv_f1 (lab/scoring/equiv; NOT the published score) next to the harness F1, lab runs only:
-- published rows have no units to normalise. Runs whose equiv columns are still pending (or failed)
-- come too, with equiv_state saying so: the figure counts them instead of plotting them.
SELECT name, source, run_id, coverage, partial, family, training_method, score, equiv_score, spelling_gap,
       equiv_state
FROM results_all
WHERE source = 'run' AND scoring_version = 'corrected_303' AND score IS NOT NULL
  AND (equiv_score IS NOT NULL OR equiv_state <> 'done')
ORDER BY spelling_gap DESC NULLS LAST, name;
