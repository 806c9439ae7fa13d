-- title: Whether a run evaluated between steps
-- description: Whether one run logged an evaluation at a step from lo to hi: an evaluation row
--   (table evals, kind 'eval': trainer_state.json, a text log) or an eval_start / eval_end event
--   (the Hugging Face and Lightning callbacks write these around each pass). A stall's gap that
--   held one is judged against the run's earlier evaluation pauses, so routine evaluations are
--   no stalls (app/diagnose/detect.py).
-- param run: run id (example: 'nanogpt-tinystories')
-- param lo: first step (example: 0)
-- param hi: last step (example: 1000000)
SELECT EXISTS (SELECT 1 FROM evals
               WHERE run = $run AND kind = 'eval' AND step BETWEEN $lo AND $hi)
    OR EXISTS (SELECT 1 FROM events
               WHERE run = $run AND kind IN ('eval_start', 'eval_end')
                 AND step BETWEEN $lo AND $hi) AS evaluated
