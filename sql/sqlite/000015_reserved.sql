-- Placeholder on branch wt-rate for migration 000015, assigned to another change (per-key
-- concurrency). The integrator drops this file when that change brings the real 000015.
SELECT 1;
