-- Every unknown field and why: the gaps no vendor document fills (yet), and what would settle them.
SELECT reference_id, field, reason, evidence_needed
FROM fields
WHERE status = 'unknown'
ORDER BY reference_id, field;
