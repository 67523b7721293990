-- Every field whose cited documents disagree: each claim with its value, date and kind, the value taken, and how
-- (resolved_by: the declared rule, or the model's take where the rule cannot decide).
SELECT f.reference_id, f.field, f.value_text AS value, f.resolved_by, c.source_id, c.value_text AS claim,
       c.value_number AS claim_in_field_unit, f.unit, c.published_on, c.publisher_kind, c.agrees
FROM fields f JOIN field_citations c USING (reference_id, field)
WHERE f.conflict
ORDER BY f.reference_id, f.field, c.published_on DESC NULLS LAST, c.source_id;
